"""Tests of the Python kit that need real processes: ``python3 -m unittest`` in this
directory (Spindle's test suite runs it when Python is installed)."""

import os
import signal
import subprocess
import sys
import time
import unittest

import spindle_job

# The file plays three parts, chosen by GUARD_PART: the test itself; "runner", a stand-in
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


if __name__ == "__main__":
    part = os.environ.get("GUARD_PART")
    if part == "runner":
        _runner()
    elif part == "program":
        _program()
    else:
        unittest.main()
