"""The spawner's other end: a small stdlib-only loop that starts bwrap for each sandbox run.

Started once per (process, sandbox uid) by _spawner as host root, with `python -I -S -c`
and this file's text, so it needs no file access after start. It drops to the sandbox uid
at once (groups cleared, real, effective and saved ids) and makes itself not dumpable (the
runs share its uid; they could not ptrace it even if they saw it), then for each request on its socket starts bwrap with subprocess.Popen, as the
owner did: the request's descriptors at the numbers asked for and no other, stdin /dev/null
(the helper's own), a new session, the signals Python ignores back at default.
It reports each child's pid, and later its wait status and CPU seconds. End of file on
the socket (the owner closed it or died) ends the helper, and with it, through
--die-with-parent, any bwrap still running.

Wire format (SOCK_SEQPACKET, one message per datagram, JSON):
    request  {"id", "argv", "env", "fds": [target numbers]} + SCM_RIGHTS, one fd per target
    replies  {"id", "pid"} or {"id", "errno", "error", "filename"}; {"exit": pid, "status", "cpu", "self_cpu"}
"""
import ctypes  # here, as root: after the drop to the sandbox uid the interpreter's files may be unreadable
import fcntl
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys

MAX_FDS = 16
LOW_FDS = 1024  # request targets lie below; the helper keeps its own descriptors above


def _send(sock, obj):
    try:
        sock.send(json.dumps(obj).encode())
    except OSError:
        os._exit(0)  # the owner is gone


def _reap(sock, live):
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        p = live.pop(pid, None)
        if p is None:
            continue  # an orphan we adopted as a subreaper (a run's sandbox init): not a run
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it
        me = resource.getrusage(resource.RUSAGE_SELF)
        _send(sock, {"exit": pid, "status": status, "cpu": ru.ru_utime + ru.ru_stime,
                     "self_cpu": me.ru_utime + me.ru_stime})


def _high_pipe():
    """A close-on-exec pipe above LOW_FDS, where no request's target can land on it."""
    pair = os.pipe()
    try:
        return tuple(fcntl.fcntl(p, fcntl.F_DUPFD_CLOEXEC, LOW_FDS) for p in pair)
    finally:
        for p in pair:
            os.close(p)


def _spawn(sock, req, fds, live):
    """Start one request with subprocess.Popen (a vfork here, as in the owner before; not
    posix_spawn, whose glibc version leaves two internal signals ignored in the child, nor a
    fork of this interpreter, twice as slow)."""
    high, placed = [], []
    try:
        targets = req["fds"]
        if len(fds) != len(targets) or targets[:2] != [1, 2] or any(t < 3 or t >= LOW_FDS for t in targets[2:]):
            raise OSError(22, "descriptors do not match the request")
        # above every target first, so no dup2 below overwrites a source still to be used
        for fd in fds:
            high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, LOW_FDS))
        while fds:
            os.close(fds.pop())
        for h, t in zip(high[2:], targets[2:]):
            os.dup2(h, t)  # inheritable, at the number the run expects
            placed.append(t)
        p = subprocess.Popen(req["argv"], env=req["env"], stdin=None, stdout=high[0], stderr=high[1],
                             pass_fds=placed, close_fds=True, start_new_session=True, restore_signals=True)
        live[p.pid] = p
        _send(sock, {"id": req["id"], "pid": p.pid})
    except (OSError, subprocess.SubprocessError) as exc:
        _send(sock, {"id": req["id"], "errno": getattr(exc, "errno", None) or 0,
                     "error": getattr(exc, "strerror", None) or str(exc), "filename": getattr(exc, "filename", None)})
    finally:
        for fd in fds + high + placed:
            os.close(fd)


def _not_dumpable():
    """PR_SET_DUMPABLE 0: processes at our uid (the runs) cannot ptrace us or read our /proc
    entries, even where they could see us (they cannot: their own PID namespace). And
    PR_SET_CHILD_SUBREAPER: a run's sandbox init, orphaned when bwrap's monitor exits first, is
    ours to reap, not a zombie waiting for the host's init (zombies count against the uid's
    process limit)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)
        libc.prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def main(uid, gid, fd):
    """Drop to uid/gid, then serve requests on socket `fd` until end of file."""
    sock = socket.socket(fileno=fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, LOW_FDS))
    os.close(fd)
    os.chdir("/")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _not_dumpable()
    wake_r, wake_w = _high_pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    poller = select.poll()  # holds no descriptor of its own, unlike epoll
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    _send(sock, {"ready": os.getpid()})
    space = socket.CMSG_SPACE(MAX_FDS * 4)
    live = {}
    peek = bytearray(1)
    while True:
        for fd, _ in poller.poll():
            if fd == wake_r:
                os.read(wake_r, 4096)
                _reap(sock, live)
                continue
            size = sock.recv_into(peek, 1, socket.MSG_PEEK | socket.MSG_TRUNC)  # the whole length
            msg, anc, _, _ = sock.recvmsg(max(size, 1), space, socket.MSG_CMSG_CLOEXEC)
            fds = []
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += list(memoryview(data)[:len(data) - len(data) % 4].cast("i"))
            if not msg:
                os._exit(0)
            _spawn(sock, json.loads(msg), fds, live)
        _reap(sock, live)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
