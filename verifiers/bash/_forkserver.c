/* vf-sandbox's fork server (compiled into vf-sandbox): its start-up paid once per process, not
 * once per run. Started with VERIFIRST_FORKSERVER_FD set and /proc/self/exe the
 * VERIFIRST_FORKSERVER_EXE named, it serves requests on that socket, each started by launcher_spawn
 * (_launcher.c) with what an exec by subprocess.Popen would give: the request's descriptors and no
 * other, default signals, cwd /. It is not dumpable, clears each request once served (the next
 * run's pid 1 is a copy of it), reaps what its runs orphan, and ends at end of file on its socket.
 *
 * Wire format (SOCK_SEQPACKET, one request per datagram, native byte order):
 *   request  u32 id, u32 nfds, i32 target[nfds], u32 argc, u32 envc, then argc + envc
 *            NUL-terminated strings; SCM_RIGHTS with nfds descriptors (targets 1, 2, then >= 3)
 *   replies  JSON: {"ready": pid}, {"id", "pid", "leader"}, {"id", "errno", "error"},
 *            {"exit": pid, "status", "cpu", "self_cpu"}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_FDS 16
#define LOW_FDS 1024 /* request targets lie below */
#define MAX_REQUEST (8 << 20)

pid_t launcher_spawn(int argc, char **argv, int *new_session); /* _launcher.c */
int launch(int argc, char **argv);                             /* _launcher.c: its main */
void default_signals(void);                                    /* _launcher.c */

static void reply(int sock, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reply(int sock, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof buf || send(sock, buf, (size_t)n, MSG_NOSIGNAL) < 0)
    _exit(0); /* the owner is gone */
}

static double seconds(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec / 1e6; }

/* The runs we forked and have not reaped yet. */
static pid_t *live;
static size_t n_live, cap_live;

static int add_live(pid_t pid) {
  if (n_live == cap_live) {
    size_t cap = cap_live ? cap_live * 2 : 64;
    pid_t *grown = realloc(live, cap * sizeof *live);
    if (!grown)
      return -1;
    live = grown;
    cap_live = cap;
  }
  live[n_live++] = pid;
  return 0;
}

static int take_live(pid_t pid) {
  for (size_t i = 0; i < n_live; i++)
    if (live[i] == pid) {
      live[i] = live[--n_live];
      return 1;
    }
  return 0;
}

/* Reap every child that has ended: our runs (reported) and the orphans we adopt as a subreaper
 * (a run's pid 1, left when its monitor exits first; not reported). */
static void reap(int sock) {
  for (;;) {
    int status;
    struct rusage ru, me;
    pid_t pid = wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0)
      return;
    if (!take_live(pid))
      continue;
    getrusage(RUSAGE_SELF, &me);
    reply(sock, "{\"exit\": %d, \"status\": %d, \"cpu\": %.6f, \"self_cpu\": %.6f}", (int)pid, status,
          seconds(ru.ru_utime) + seconds(ru.ru_stime), seconds(me.ru_utime) + seconds(me.ru_stime));
  }
}

/* Every descriptor from 3 up but the targets, in ranges between them. */
static void close_others(const int *targets, int n) {
  for (unsigned int from = 3, to = 0; to != ~0U; from = to + 1) {
    to = ~0U; /* the lowest target at or above `from` */
    for (int i = 0; i < n; i++)
      if ((unsigned int)targets[i] >= from && (unsigned int)targets[i] < to)
        to = (unsigned int)targets[i];
    if (to > from && syscall(SYS_close_range, from, to - 1, 0) != 0)
      for (long fd = from, max = sysconf(_SC_OPEN_MAX); fd < (to == ~0U ? max : (long)to); fd++)
        close((int)fd);
  }
}

/* In the child: descriptors, session (when the launcher asked for one), dumpable, environment;
 * then the launcher (which unblocks the signals). */
static void run_child(const int *fds, const int *targets, int n, int new_session, int argc, char **argv,
                      char **envp) {
  int high[MAX_FDS];
  for (int i = 0; i < n; i++) /* above every target first: no dup2 below overwrites a source */
    if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, LOW_FDS)) < 0)
      _exit(127);
  for (int i = 0; i < n; i++)
    if (dup2(high[i], targets[i]) < 0) /* inheritable, at the number the run expects */
      _exit(127);
  close_others(targets, n);
  if ((new_session && setsid() < 0) || chdir("/") != 0 || prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0)
    _exit(127);
  environ = envp;
  exit(launch(argc, argv));
}

static int parse(char *buf, size_t len, uint32_t *id, int *targets, uint32_t *nfds, int *argc, char ***argv,
                 char ***envp) {
  uint32_t head[2], counts[2];
  if (len < sizeof head)
    return -1;
  memcpy(head, buf, sizeof head);
  *id = head[0];
  *nfds = head[1];
  if (*nfds < 2 || *nfds > MAX_FDS || len < sizeof head + *nfds * 4 + sizeof counts)
    return -1;
  memcpy(targets, buf + sizeof head, *nfds * 4);
  if (targets[0] != 1 || targets[1] != 2)
    return -1;
  for (uint32_t i = 2; i < *nfds; i++)
    if (targets[i] < 3 || targets[i] >= LOW_FDS)
      return -1;
  size_t off = sizeof head + *nfds * 4;
  memcpy(counts, buf + off, sizeof counts);
  off += sizeof counts;
  if (counts[0] < 1 || counts[0] > 1 << 20 || counts[1] > 1 << 20)
    return -1;
  char **v = calloc((size_t)counts[0] + counts[1] + 2, sizeof(char *));
  if (!v)
    return -1;
  char *p = buf + off, *end = buf + len;
  for (uint32_t i = 0; i < counts[0] + counts[1]; i++) {
    char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) {
      free(v);
      return -1;
    }
    v[i < counts[0] ? i : i + 1] = p;
    p = z + 1;
  }
  *argc = (int)counts[0];
  *argv = v;
  *envp = v + counts[0] + 1;
  return 0;
}

static void serve_one(int sock) {
  char control[CMSG_SPACE(MAX_FDS * sizeof(int))];
  char peek;
  struct iovec piov = {&peek, 1};
  struct msghdr pm = {.msg_iov = &piov, .msg_iovlen = 1};
  ssize_t size = recvmsg(sock, &pm, MSG_PEEK | MSG_TRUNC);
  if (size <= 0)
    _exit(0); /* end of file: the owner closed the socket or died */
  if (size > MAX_REQUEST)
    size = MAX_REQUEST;
  char *buf = malloc((size_t)size + 1);
  if (!buf)
    _exit(1);
  struct iovec iov = {buf, (size_t)size};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
  ssize_t got = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  if (got <= 0)
    _exit(0);
  int fds[MAX_FDS], nrecv = 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (nrecv < MAX_FDS)
          fds[nrecv++] = fd;
        else
          close(fd);
      }
    }
  uint32_t id = 0, nfds = 0;
  int targets[MAX_FDS], argc = 0;
  char **argv = NULL, **envp = NULL;
  if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
      parse(buf, (size_t)got, &id, targets, &nfds, &argc, &argv, &envp) != 0 || nfds != (uint32_t)nrecv) {
    reply(sock, "{\"id\": %u, \"errno\": %d, \"error\": \"malformed request (its descriptors, argv or size)\"}", id,
          EINVAL);
  } else {
    int new_session = 1;
    pid_t pid = launcher_spawn(argc, argv, &new_session);
    if (pid == 0) {
      close(sock);
      run_child(fds, targets, (int)nfds, new_session, argc, argv, envp);
    }
    if (pid < 0)
      reply(sock, "{\"id\": %u, \"errno\": %d, \"error\": \"%s\"}", id, errno, strerror(errno));
    else if (add_live(pid) != 0)
      _exit(1); /* out of memory: the owner sees us gone, the run dies with us */
    else
      reply(sock, "{\"id\": %u, \"pid\": %d, \"leader\": %d}", id, (int)pid, new_session);
  }
  for (int i = 0; i < nrecv; i++)
    close(fds[i]);
  /* Cleared, not only freed: the next run's pid 1 is a copy of this process, and a request holds
   * a run's command (a gold command, say) and environment. */
  explicit_bzero(buf, (size_t)size + 1);
  free(argv);
  free(buf);
}

/* Whether this process is the program the owner started as the server (VERIFIRST_FORKSERVER_EXE):
 * not a shell running a script of that name, nor anything that program goes on to exec. */
static int is_the_server(void) {
  const char *want = getenv("VERIFIRST_FORKSERVER_EXE");
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (!want || n <= 0)
    return 0;
  exe[n] = 0;
  return strcmp(exe, want) == 0;
}

/* vf-sandbox's main: serve when started as the fork server, else launch once. */
int main(int argc, char **argv) {
  default_signals();
  const char *fd_text = getenv("VERIFIRST_FORKSERVER_FD");
  if (!fd_text || !is_the_server())
    return launch(argc, argv);
  int sock = fcntl(atoi(fd_text), F_DUPFD_CLOEXEC, LOW_FDS + MAX_FDS);
  if (sock < 0)
    return 125;
  close(atoi(fd_text));
  unsetenv("VERIFIRST_FORKSERVER_FD");
  unsetenv("VERIFIRST_FORKSERVER_EXE");
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* processes at our uid (the runs) cannot ptrace us */
  /* A run's pid 1 outlives its monitor for a moment; orphaned, it would wait for the host's init
   * to reap it, and such zombies count against the sandbox uid's process limit. */
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0)
    return 125;
  int high_sfd = fcntl(sfd, F_DUPFD_CLOEXEC, LOW_FDS + MAX_FDS);
  close(sfd);
  reply(sock, "{\"ready\": %d}", (int)getpid());
  struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = high_sfd, .events = POLLIN}};
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return 125;
    }
    if (p[1].revents) {
      struct signalfd_siginfo si;
      while (read(high_sfd, &si, sizeof si) == sizeof si) {
      }
      reap(sock);
    }
    if (p[0].revents)
      serve_one(sock);
  }
}
