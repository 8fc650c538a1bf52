"""Spindle's job kit for Python (standard library only): job types served over Spindle's
job protocol, version 1 (docs/job-protocol.md in Spindle's repository).

A job is a decorated function::

    import spindle_job

    @spindle_job.job("greet", required=["name"])
    def greet(ctx):
        print("hello", ctx.args["name"])      # the job's live output
        ctx.data["greeted"] = ctx.args["name"]  # job data for the jobs after it

    spindle_job.serve()

or a class with Spin Cycle's job interface (create, serialize, deserialize, run, stop,
status), registered with :func:`register`. The function form completes when the function
returns and fails (exit 1, the exception as the error) when it raises; it may return a
:class:`Return` to say otherwise.

Spindle runs the program once per call: the call is in the environment
(``SPINDLE_JOB_CALL``) and on stdin (one JSON document); answers and status lines go to
the descriptor ``SPINDLE_JOB_FD`` names, one JSON object a line, so that stdout and
stderr stay the job's own output. A stop is SIGTERM: the job's ``stop`` is called (for a
function job, ``ctx.stopping`` is set). When the Job Runner does not supervise the program
(``SPINDLE_JOB_PARENT_PID`` is set), the program kills its own process group, the job's
children included, if the runner dies.
"""

import base64
import json
import os
import signal
import sys
import threading
import traceback
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

PROTOCOL = 1

#: A JSON object: job args, job data, a message.
Json = Dict[str, Any]

#: How often a running job's status is read, in seconds.
STATUS_INTERVAL = 0.25

COMPLETE, FAIL, STOPPED = "COMPLETE", "FAIL", "STOPPED"


class Return:
    """The end of one try: ``state`` (COMPLETE, FAIL or STOPPED), ``exit`` and ``error``."""

    def __init__(self, state: str = COMPLETE, exit: int = 0, error: str = "") -> None:
        self.state = state
        self.exit = exit
        self.error = error


class Job:
    """A job with Spin Cycle's interface. ``job_id`` has ``type``, ``name``, ``id`` and
    ``request_id``. The defaults keep the args as the job's bytes."""

    #: Job args a node of this type must pass (the linter checks them).
    required: Sequence[str] = ()
    optional: Sequence[str] = ()

    def __init__(self, job_id: Json) -> None:
        self.job_id = job_id
        self.args: Json = {}

    def create(self, args: Json) -> None:
        """May check and change ``args`` (the changed args reach later nodes' ``sets:``)."""
        self.args = args

    def serialize(self) -> bytes:
        return json.dumps(self.args).encode()

    def deserialize(self, data: bytes) -> None:
        self.args = json.loads(data.decode()) if data else {}

    def run(self, data: Json) -> Optional[Return]:
        """One try; may change ``data`` (job data). Returns a :class:`Return`."""
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def status(self) -> str:
        return ""


class Context:
    """What a function job gets: its ``args``, the job ``data`` (change it in place),
    ``job_id``, ``set_status(text)`` and ``stopping`` (a threading.Event set on stop)."""

    def __init__(self, job_id: Json, args: Json, data: Json) -> None:
        self.job_id = job_id
        self.args = args
        self.data = data
        self.stopping = threading.Event()
        self._status = ""

    def set_status(self, text: object) -> None:
        self._status = str(text)


#: A function job: ``f(ctx)``, which may return a :class:`Return`.
JobFunction = Callable[[Context], Optional[Return]]


class _FunctionJob(Job):
    def __init__(
        self, job_id: Json, function: JobFunction, required: List[str], optional: List[str]
    ) -> None:
        super().__init__(job_id)
        self.function = function
        self.required = required
        self.optional = optional
        self.context: Optional[Context] = None

    def create(self, args: Json) -> None:
        missing = [name for name in self.required if name not in args]
        if missing:
            raise ValueError("%s job arg is not set" % missing[0])
        self.args = args

    def run(self, data: Json) -> Return:
        self.context = Context(self.job_id, self.args, data)
        returned = self.function(self.context)
        return returned if isinstance(returned, Return) else Return()

    def stop(self) -> None:
        if self.context is not None:
            self.context.stopping.set()

    def status(self) -> str:
        return self.context._status if self.context is not None else ""


#: Makes a job of a type from its ``job_id``.
Maker = Callable[[Json], Job]

_types: Dict[str, Tuple[Maker, List[str], List[str]]] = {}


def register(
    job_type: str, make: Maker, required: Sequence[str] = (), optional: Sequence[str] = ()
) -> None:
    """Serves ``job_type``: ``make(job_id)`` returns a :class:`Job`."""
    _types[job_type] = (make, list(required), list(optional))


def job(
    job_type: str, required: Sequence[str] = (), optional: Sequence[str] = ()
) -> Callable[[JobFunction], JobFunction]:
    """A decorator: the function ``f(ctx)`` is a job of ``job_type``."""

    def decorate(function: JobFunction) -> JobFunction:
        register(
            job_type,
            lambda job_id: _FunctionJob(job_id, function, list(required), list(optional)),
            required,
            optional,
        )
        return function

    return decorate


def job_class(cls: Any) -> Any:
    """A class decorator: registers ``cls`` (a :class:`Job` with a ``type`` attribute)."""
    register(cls.type, cls, getattr(cls, "required", ()), getattr(cls, "optional", ()))
    return cls


class _Lines:
    """One JSON object a line on the protocol descriptor, from any thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def write(self, message: Json) -> None:
        with self.lock:
            self.stream.write(json.dumps(message) + "\n")
            self.stream.flush()


def _answer(**fields: Any) -> Json:
    fields["protocol"] = PROTOCOL
    return fields


def _make(call: Json) -> Job:
    ident = call.get("job") or {}
    entry = _types.get(ident.get("type"))
    if entry is None:
        raise LookupError(
            "unknown job type %r; this program serves: %s"
            % (ident.get("type"), ", ".join(sorted(_types)) or "none")
        )
    return entry[0](ident)


def _describe() -> Json:
    return _answer(
        types=[
            {"type": name, "required": required, "optional": optional}
            for name, (_, required, optional) in sorted(_types.items())
        ]
    )


def _create(call: Json) -> Json:
    try:
        made = _make(call)
        args = call.get("args") or {}
        made.create(args)
        data = made.serialize() or b""
    except Exception as err:  # the job's own error is the create's
        return _answer(error=str(err) or type(err).__name__)
    return _answer(args=args, bytes=base64.b64encode(data).decode())


def _run(call: Json, lines: _Lines) -> Json:
    data = call.get("data") or {}
    try:
        made = _make(call)
        made.deserialize(base64.b64decode(call.get("bytes") or ""))
    except Exception as err:
        return _answer(state=FAIL, exit=1, error="cannot make the job: %s" % err, data=data)
    if not made.args and call.get("args"):
        made.args = call["args"]
    signal.signal(signal.SIGTERM, lambda *_: made.stop())
    signal.signal(signal.SIGINT, lambda *_: made.stop())
    done = threading.Event()

    def report() -> None:
        last = ""
        while not done.wait(STATUS_INTERVAL):
            try:
                status = made.status() or ""
            except Exception:
                continue
            if status != last:
                last = status
                lines.write({"status": status})

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        returned = made.run(data)
        if not isinstance(returned, Return):
            returned = Return()
    except Exception as err:
        traceback.print_exc()
        returned = Return(FAIL, 1, "%s: %s" % (type(err).__name__, err))
    finally:
        done.set()
        reporter.join()
    return _answer(state=returned.state, exit=returned.exit, error=returned.error or "", data=data)


def _end_group() -> None:
    os.killpg(0, signal.SIGKILL)
    os._exit(128 + signal.SIGKILL)


def _guard_parent(parent: str) -> None:
    """Ends this program's process group when the Job Runner named by ``parent`` dies: the
    kernel sends SIGUSR1 at its death (Linux's PR_SET_PDEATHSIG, through ctypes); a SIGUSR1
    while it lives is ignored."""
    if not parent:
        return
    if not parent.isdigit() or int(parent) <= 1:
        raise RuntimeError(
            "SPINDLE_JOB_PARENT_PID is %r; expected the process id of the Job Runner" % parent
        )
    if not sys.platform.startswith("linux"):
        raise RuntimeError(
            "SPINDLE_JOB_PARENT_PID is set, but this kit guards against the Job Runner's "
            "death only on Linux; remove `supervised: false` from the program's config"
        )
    import ctypes

    want = int(parent)
    signal.signal(signal.SIGUSR1, lambda *_: os.getppid() != want and _end_group())
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGUSR1), 0, 0, 0) != 0:
        raise RuntimeError(
            "cannot ask for a signal at the Job Runner's death (prctl PR_SET_PDEATHSIG): %s"
            % os.strerror(ctypes.get_errno())
        )
    # The runner may have died before the request took effect.
    if os.getppid() != want:
        _end_group()


def _answer_call(fd: int) -> int:
    """Reads the call on stdin, answers it on descriptor ``fd``; returns the exit code."""
    lines = _Lines(os.fdopen(fd, "w"))
    try:
        call = json.load(sys.stdin)
    except ValueError as err:
        lines.write(_answer(error="cannot read the call on stdin: %s" % err))
        return 0
    if call.get("protocol") != PROTOCOL:
        lines.write(
            _answer(
                error="this Python kit speaks job protocol %d; the call is protocol %r"
                % (PROTOCOL, call.get("protocol"))
            )
        )
        return 0
    kind = call.get("call")
    if kind == "describe":
        answer = _describe()
    elif kind == "create":
        answer = _create(call)
    elif kind == "run":
        answer = _run(call, lines)
    else:
        answer = _answer(error="unknown call %r; expected describe, create or run" % kind)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        lines.write(answer)
    except (TypeError, ValueError) as err:
        # Job data (or args) that JSON cannot hold: the call fails, saying so.
        lines.write(
            _answer(state=FAIL, exit=1, error="the answer is not JSON: %s" % err, data=call.get("data"))
            if kind == "run"
            else _answer(error="the answer is not JSON: %s" % err)
        )
    return 0


def _forked(fds: List[int], server: int) -> None:
    """In a try's process just forked by the fork server: its four descriptors become
    stdin, stdout, stderr and 3, and it runs as if Spindle had started it; never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 3:
                os.close(fd)
        os.environ["SPINDLE_JOB_CALL"] = "run"
        os.environ["SPINDLE_JOB_FD"] = "3"
        os.environ["SPINDLE_JOB_PARENT_PID"] = str(server)
        _guard_parent(str(server))
        code = _answer_call(3)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _serve_forks(fd: int) -> None:
    """The fork server (``SPINDLE_JOB_CALL=serve``, docs/job-protocol.md): one process, its
    jobs' module imported once, that forks a process for each try the Job Runner asks for
    on the socket ``fd``, and says when each ends. It ends when the runner closes the
    socket (or dies: the guard)."""
    import select
    import socket

    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    server = os.getpid()
    children: Dict[int, Any] = {}

    def send(message: Json) -> None:
        sock.send(json.dumps(message).encode())

    send({"protocol": PROTOCOL, "ready": True})
    while True:
        try:
            readable, _, _ = select.select([sock, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            send({"exited": children.pop(pid), "status": 128 - code if code < 0 else code})
        if sock not in readable:
            continue
        message, fds, _, _ = socket.recv_fds(sock, 65536, 4)
        if not message:
            os._exit(0)
        try:
            ident = json.loads(message)["fork"]
        except (ValueError, KeyError, TypeError):
            for fd in fds:
                os.close(fd)
            send({"error": "cannot read %r; expected {\"fork\": ID} with 4 descriptors" % message[:200]})
            continue
        if len(fds) != 4:
            for fd in fds:
                os.close(fd)
            send({"forked": ident, "error": "got %d descriptors; expected 4" % len(fds)})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _forked(fds, server)
        for fd in fds:
            os.close(fd)
        children[pid] = ident
        send({"forked": ident, "pid": pid})


def serve() -> None:
    """Answers the call Spindle made of this program, then exits (or, as a fork server,
    serves the Job Runner's tries until it goes)."""
    try:
        _guard_parent(os.environ.get("SPINDLE_JOB_PARENT_PID", ""))
    except RuntimeError as err:
        sys.stderr.write("spindle_job: %s\n" % err)
        sys.exit(2)
    fd_text = os.environ.get("SPINDLE_JOB_FD", "")
    if not fd_text.isdigit():
        sys.stderr.write(
            "this is a Spindle job program: Spindle runs it for its job types "
            "(SPINDLE_JOB_FD is %r; expected a descriptor number)\n" % fd_text
        )
        sys.exit(2)
    if os.environ.get("SPINDLE_JOB_CALL") == "serve":
        _serve_forks(int(fd_text))
    sys.exit(_answer_call(int(fd_text)))
