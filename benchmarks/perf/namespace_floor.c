/* The floor under a sandboxed run: the kernel work no launcher can skip, done by the least code.
 *
 * Built and run by benchmarks/perf/sandbox.py (namespace_floor), never by the package. Each run,
 * from a fork of this process: drop to UID:GID (as root; otherwise stay as we are), new user,
 * mount, pid, network (loopback up), IPC, UTS and cgroup namespaces, then pid 1 of the new pid
 * namespace builds the root a run sees: an overlay on LOWER, read-only recursive binds of /usr,
 * /etc and /sys (open_tree + mount_setattr: no mount table to read back), /proc, a /dev of six
 * device binds, devpts and the usual links, one pivot_root, a host name, a nested user namespace
 * with no more below it, the capability bounding set cut down; then bash -c true as pid 2. The
 * same harness times two plain fork + exec of `bash -c 'echo hello'`, one after the other.
 *
 *   namespace_floor MODE LOWER SCRATCH N UID GID
 *     MODE plain | single | pair (two runs at once); UID -1: do not drop
 *   prints the median wall ms over N
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x1
#define MOUNT_ATTR_NOSUID 0x2
#define MOUNT_ATTR_NODEV 0x4
struct mount_attr {
  unsigned long long attr_set, attr_clr, propagation, userns_fd;
};
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x4
#endif

static void die(const char *what) {
  fprintf(stderr, "namespace_floor: %s: %s\n", what, strerror(errno));
  _exit(126);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) < 0)
    die(path);
  close(fd);
}

static void bind_read_only(const char *src, const char *dst) {
  int fd = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | AT_RECURSIVE | O_CLOEXEC);
  struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
  if (fd < 0 || syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0 ||
      syscall(SYS_move_mount, fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) != 0)
    die(src);
  close(fd);
}

static void bind_device(const char *name) {
  char src[64], dst[64];
  snprintf(src, sizeof src, "/dev/%s", name);
  snprintf(dst, sizeof dst, "dev/%s", name);
  int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
  if (fd < 0 || mount(src, dst, NULL, MS_BIND, NULL) != 0)
    die(src);
  close(fd);
}

static int run_pid1(const char *lower, const char *upper, const char *work, const char *root) {
  char opts[4096];
  snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower, upper, work);
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0 ||
      mount("overlay", root, "overlay", MS_NOSUID | MS_NODEV, opts) != 0 || chdir(root) != 0)
    die("overlay root");
  bind_read_only("/usr", "usr");
  bind_read_only("/etc", "etc");
  bind_read_only("/sys", "sys");
  if (mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 ||
      mount("tmpfs", "dev", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
    die("proc, dev");
  const char *devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (int i = 0; i < 6; i++)
    bind_device(devices[i]);
  const char *links[][2] = {{"/proc/self/fd", "dev/fd"}, {"/proc/self/fd/0", "dev/stdin"},
                            {"/proc/self/fd/1", "dev/stdout"}, {"/proc/self/fd/2", "dev/stderr"},
                            {"pts/ptmx", "dev/ptmx"}};
  for (int i = 0; i < 5; i++)
    if (symlink(links[i][0], links[i][1]) != 0)
      die(links[i][1]);
  if (mkdir("dev/shm", 01777) != 0 || mkdir("dev/pts", 0755) != 0 ||
      mount("devpts", "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") != 0)
    die("devpts");
  if (syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 || chdir("/") != 0)
    die("pivot_root");
  if (sethostname("verifirst", 9) != 0)
    die("hostname");
  write_file("/proc/sys/user/max_user_namespaces", "1");
  if (unshare(CLONE_NEWUSER) != 0)
    die("nested user namespace");
  write_file("/proc/self/uid_map", "0 0 1");
  write_file("/proc/self/setgroups", "deny");
  write_file("/proc/self/gid_map", "0 0 1");
  for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
    if (cap != CAP_CHOWN && cap != CAP_DAC_OVERRIDE && cap != CAP_FOWNER && cap != CAP_KILL &&
        cap != CAP_SETUID && cap != CAP_SETGID)
      prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  pid_t child = fork();
  if (child == 0) {
    char *argv[] = {"/bin/bash", "-c", "true", NULL};
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    setsid();
    execve(argv[0], argv, envp);
    die("exec bash");
  }
  int status;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR)
      die("wait");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One run, in a forked child of the harness (its "monitor"). */
static void run(const char *lower, const char *upper, const char *work, const char *root, int uid, int gid) {
  char map[64];
  if (uid >= 0 && (setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0))
    die("drop to the sandbox uid");
  int me = (int)getuid(), my_group = (int)getgid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_DUMPABLE, 1, 0, 0, 0); /* a uid drop clears it: /proc/self would stay root's */
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
              CLONE_NEWCGROUP) != 0)
    die("unshare");
  write_file("/proc/self/setgroups", "deny");
  snprintf(map, sizeof map, "0 %d 1", me);
  write_file("/proc/self/uid_map", map);
  snprintf(map, sizeof map, "0 %d 1", my_group);
  write_file("/proc/self/gid_map", map);
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq lo = {0};
  strcpy(lo.ifr_name, "lo");
  lo.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
  if (sock < 0 || ioctl(sock, SIOCSIFFLAGS, &lo) != 0)
    die("loopback");
  close(sock);
  pid_t pid1 = fork();
  if (pid1 == 0)
    _exit(run_pid1(lower, upper, work, root));
  int status;
  while (waitpid(pid1, &status, 0) < 0)
    if (errno != EINTR)
      die("wait");
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int wait_ok(pid_t pid) {
  int status;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: namespace_floor plain|single|pair LOWER SCRATCH N UID GID\n");
    return 2;
  }
  const char *mode = argv[1], *lower = argv[2], *scratch = argv[3];
  int n = atoi(argv[4]), uid = atoi(argv[5]), gid = atoi(argv[6]);
  int runs = strcmp(mode, "pair") == 0 ? 2 : 1;
  double *walls = calloc((size_t)(n > 0 ? n : 1), sizeof *walls);
  for (int i = 0; i < n; i++) {
    char dirs[2][3][4096];
    pid_t pids[2];
    double t0 = now_ms();
    if (strcmp(mode, "plain") == 0) {
      for (int k = 0; k < 2; k++) {
        pid_t p = fork();
        if (p == 0) {
          char *av[] = {"/bin/bash", "-c", "echo hello", NULL};
          int null = open("/dev/null", O_WRONLY);
          dup2(null, 1);
          execv(av[0], av);
          _exit(127);
        }
        if (!wait_ok(p))
          return 1;
      }
    } else {
      for (int k = 0; k < runs; k++) {
        const char *names[3] = {"up", "wk", "root"};
        for (int d = 0; d < 3; d++) {
          snprintf(dirs[k][d], sizeof dirs[k][d], "%s/%s-%d-%d", scratch, names[d], i, k);
          if (mkdir(dirs[k][d], d == 1 ? 0700 : 0755) != 0 || (uid >= 0 && chown(dirs[k][d], (uid_t)uid, (gid_t)gid) != 0))
            die(dirs[k][d]);
        }
        if ((pids[k] = fork()) == 0)
          run(lower, dirs[k][0], dirs[k][1], dirs[k][2], uid, gid);
      }
      for (int k = 0; k < runs; k++)
        if (!wait_ok(pids[k]))
          return 1;
    }
    walls[i] = now_ms() - t0;
  }
  qsort(walls, (size_t)n, sizeof *walls, cmp);
  printf("%.3f\n", walls[n / 2]);
  return 0;
}
