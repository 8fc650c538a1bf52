"""Tests of the Python kit, with real processes: ``python3 -m unittest`` in this directory
(Spindle's test suite runs it when Python is installed, and checks every line the kit
wrote here against the job protocol's schema)."""

import base64
import json
import os
import signal
import subprocess
import sys
import time
import unittest

import spindle_job

# The file plays four parts, chosen by GUARD_PART: the test itself; "jobs", a job program
# of test jobs (the protocol's tests); "runner", a stand-in
# for a Job Runner that starts the job program and waits; "program", which guards itself
# against the runner's death, starts a child of its own (the job's command), says both
# pids and waits, writing nothing more (so no broken pipe ends it).
HERE = os.path.dirname(os.path.abspath(__file__))


def _runner():
    env = dict(os.environ, GUARD_PART="program", SPINDLE_JOB_PARENT_PID=str(os.getpid()))
    subprocess.run([sys.executable, __file__], env=env, start_new_session=True, check=False)


def _program():
    spindle_job._guard_parent(os.environ["SPINDLE_JOB_PARENT_PID"])
    child = subprocess.Popen(["sleep", "60"])
    print(os.getpid(), child.pid, flush=True)
    child.wait()


def _alive(pid):
    """Whether pid runs (a zombie, ended but not reaped, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as stat:
            text = stat.read()
    except OSError:
        return False
    return text[text.rindex(")") + 1 :].split()[0] not in ("Z", "X")


class GuardTest(unittest.TestCase):
    @unittest.skipUnless(sys.platform.startswith("linux"), "the guard is Linux's")
    def test_a_program_ends_its_group_when_its_runner_dies(self):
        runner = subprocess.Popen(
            [sys.executable, __file__],
            env=dict(os.environ, GUARD_PART="runner"),
            stdout=subprocess.PIPE,
            text=True,
        )
        line = runner.stdout.readline()
        pids = [int(word) for word in line.split()]
        self.assertEqual(len(pids), 2, "the program said %r" % line)
        for pid in pids:
            self.assertTrue(_alive(pid), "process %d is not running before the runner dies" % pid)
        runner.kill()
        runner.wait()
        deadline = time.monotonic() + 10
        for pid in pids:
            while _alive(pid):
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    self.fail("process %d (of the program and its child %r) outlived its runner" % (pid, pids))
                time.sleep(0.01)

    def test_a_malformed_parent_is_refused(self):
        for parent in ("runner", "1", "-4"):
            with self.assertRaisesRegex(RuntimeError, "SPINDLE_JOB_PARENT_PID"):
                spindle_job._guard_parent(parent)
        spindle_job._guard_parent("")


# ---- the protocol: describe, create, run, status lines, a stop and errors ----


def _jobs_program():
    """GUARD_PART=jobs: a job program of test jobs, served by the kit."""

    @spindle_job.job("greet", required=["name"])
    def greet(ctx):
        print("hello", ctx.args["name"])
        ctx.data["greeted"] = ctx.args["name"]

    @spindle_job.job("fails")
    def fails(ctx):
        raise RuntimeError("the disk is full")

    @spindle_job.job("waits")
    def waits(ctx):
        ctx.set_status("waiting for the stop")
        ctx.stopping.wait(30)
        return spindle_job.Return(spindle_job.STOPPED, 0, "stopped")

    spindle_job.STATUS_INTERVAL = 0.01
    spindle_job.serve()


def _call(call, stop_after_status=False):
    """Runs the test jobs' program for ``call`` as Spindle would (the call on stdin, its
    lines on a pipe named by SPINDLE_JOB_FD); returns its lines and its stdout."""
    read_end, write_end = os.pipe()
    env = dict(
        os.environ,
        GUARD_PART="jobs",
        SPINDLE_JOB_PROTOCOL="1",
        SPINDLE_JOB_CALL=str(call.get("call")),
        SPINDLE_JOB_FD=str(write_end),
    )
    env.pop("SPINDLE_JOB_PARENT_PID", None)
    program = subprocess.Popen(
        [sys.executable, __file__],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_end,),
        text=True,
    )
    os.close(write_end)
    program.stdin.write(json.dumps(call))
    program.stdin.close()
    lines = []
    with os.fdopen(read_end) as protocol:
        for text in protocol:
            line = json.loads(text)
            lines.append(line)
            _record(call, line)
            if stop_after_status and "status" in line:
                program.send_signal(signal.SIGTERM)
                stop_after_status = False
    stdout = program.stdout.read()
    program.stdout.close()
    program.wait(30)
    return lines, stdout


def _record(call, line):
    """Appends ``line`` to the file SPINDLE_PROTOCOL_LINES names, when it is set: Spindle's
    test suite checks each against the job protocol's schema."""
    path = os.environ.get("SPINDLE_PROTOCOL_LINES")
    if not path:
        return
    kind = call.get("call") if call.get("protocol") == spindle_job.PROTOCOL else "another-protocol"
    with open(path, "a") as out:
        out.write(json.dumps({"kit": "python", "call": kind, "line": line}) + "\n")


JOB = {"type": "greet", "name": "hi", "id": "a1", "request_id": "r1"}


class ProtocolTest(unittest.TestCase):
    def test_describe_lists_the_types_and_their_args(self):
        lines, _ = _call({"call": "describe", "protocol": 1})
        self.assertEqual(len(lines), 1)
        types = {t["type"]: t for t in lines[0]["types"]}
        self.assertEqual(sorted(types), ["fails", "greet", "waits"])
        self.assertEqual(types["greet"]["required"], ["name"])

    def test_create_answers_the_args_and_the_bytes_or_the_jobs_error(self):
        call = {"call": "create", "protocol": 1, "job": JOB, "args": {"name": "ann"}, "sets": []}
        lines, _ = _call(call)
        self.assertEqual(lines[-1]["args"], {"name": "ann"})
        self.assertEqual(json.loads(base64.b64decode(lines[-1]["bytes"])), {"name": "ann"})
        lines, _ = _call(dict(call, args={}))
        self.assertEqual(lines[-1], {"protocol": 1, "error": "name job arg is not set"})
        lines, _ = _call(dict(call, job=dict(JOB, type="nope")))
        self.assertIn("unknown job type 'nope'", lines[-1]["error"])

    def test_run_answers_the_state_and_the_data_and_its_output_is_stdout(self):
        bytes_ = base64.b64encode(b'{"name": "ann"}').decode()
        call = {"call": "run", "protocol": 1, "job": JOB, "bytes": bytes_, "args": {}, "data": {"a": 1}}
        lines, stdout = _call(call)
        self.assertEqual(
            lines[-1],
            {"protocol": 1, "state": "COMPLETE", "exit": 0, "error": "", "data": {"a": 1, "greeted": "ann"}},
        )
        self.assertEqual(stdout, "hello ann\n")
        lines, _ = _call(dict(call, job=dict(JOB, type="fails")))
        self.assertEqual(
            (lines[-1]["state"], lines[-1]["exit"], lines[-1]["error"]),
            ("FAIL", 1, "RuntimeError: the disk is full"),
        )

    def test_a_running_job_sends_its_status_and_a_stop_stops_it(self):
        call = {"call": "run", "protocol": 1, "job": dict(JOB, type="waits"), "bytes": "", "args": {}, "data": {}}
        lines, _ = _call(call, stop_after_status=True)
        self.assertEqual(lines[0], {"status": "waiting for the stop"})
        self.assertEqual((lines[-1]["state"], lines[-1]["error"]), ("STOPPED", "stopped"))

    def test_another_protocol_version_is_answered_with_ours(self):
        lines, _ = _call({"call": "run", "protocol": 2})
        self.assertEqual(lines[-1]["protocol"], 1)
        self.assertIn("speaks job protocol 1", lines[-1]["error"])


if __name__ == "__main__":
    part = os.environ.get("GUARD_PART")
    if part == "runner":
        _runner()
    elif part == "program":
        _program()
    elif part == "jobs":
        _jobs_program()
    else:
        unittest.main()
