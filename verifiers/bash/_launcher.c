/* vf-sandbox: the sandbox's own launcher. It takes bwrap's command line (the subset _bwrap.argv
 * writes, plus --rlimit and --join-cgroup; anything else is refused) and builds what bwrap
 * builds from it (tests/test_sandbox_launcher.py), with no privilege of its own; properties and
 * their reasons: docs/sandbox-threat-model.md. The monitor clones pid 1 into a new user and pid
 * namespace (given --userns, it enters that one first) and exits with its status; pid 1 makes the
 * other namespaces, builds the root and forks the command as pid 2, whose status it exits with
 * (128 + a killing signal). Started by the fork server (_forkserver.c), a run without --userns has
 * no monitor. A failure before the command runs prints "vf-sandbox: WHAT: ERROR" and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY /* a C library older than the mount API (glibc < 2.36 declares none of it) */
#define MOUNT_ATTR_RDONLY 0x1
#define MOUNT_ATTR_NOSUID 0x2
#define MOUNT_ATTR_NODEV 0x4
#define MOUNT_ATTR_NOEXEC 0x8
#define OPEN_TREE_CLONE 1
#define MOVE_MOUNT_F_EMPTY_PATH 0x4
#define MOVE_MOUNT_T_EMPTY_PATH 0x40
struct mount_attr {
  unsigned long long attr_set, attr_clr, propagation, userns_fd;
};
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif

#define VERSION "vf-sandbox 1.1.2"
#define MAX_OPS 64
#define MAX_ENV 256

extern char **environ;

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  int saved = errno;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dprintf(2, "vf-sandbox: %s%s%s\n", msg, saved ? ": " : "", saved ? strerror(saved) : "");
  _exit(1);
}

#define usage(...) (errno = 0, die(__VA_ARGS__)) /* a bad command line: no system error to add */

enum op_kind { OP_BIND, OP_RO_BIND, OP_OVERLAY, OP_PROC, OP_DEV, OP_TMPFS };
struct op {
  enum op_kind kind;
  const char *src, *dest, *upper, *work;
  unsigned long long size; /* a tmpfs's size in bytes (--size), 0: the kernel's default */
  unsigned perms;          /* a tmpfs's mode (--perms) */
};

#define MAX_LIMITS 8
#define MAX_CGROUPS 4

static struct {
  int userns_fd, assert_userns_disabled, disable_userns, die_with_parent, new_session;
  int unshare_user, unshare_ipc, unshare_pid, unshare_net, unshare_uts, unshare_cgroup;
  const char *hostname, *chdir_to;
  const char *overlay_src;
  struct op ops[MAX_OPS];
  int n_ops;
  unsigned long long caps;
  char *env[MAX_ENV + 1];
  int n_env;
  char **command;
  int seccomp_fd;                   /* --seccomp: a BPF program the command runs under */
  unsigned long long next_size;     /* --size, for the next --tmpfs */
  unsigned next_perms;              /* --perms, for the next --tmpfs */
  struct { int resource; rlim_t value; } limits[MAX_LIMITS]; /* --rlimit: pid 1's, inherited */
  int n_limits;
  int cgroup_fds[MAX_CGROUPS];      /* --join-cgroup: cgroup.procs files pid 1 moves itself into */
  int cgroup_try[MAX_CGROUPS];      /* --join-cgroup-try: one it may fail to join (a cpu group: RT) */
  int n_cgroups;
} opt = {.userns_fd = -1, .seccomp_fd = -1, .next_perms = 0755};

static int cap_number(const char *name) {
  static const char *names[] = {
      "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
      "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
      "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
      "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
      "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
      "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
      "CAP_SETFCAP"};
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (strcmp(names[i], name) == 0)
      return i;
  return -1;
}

static void set_env(const char *key, const char *value) {
  size_t klen = strlen(key);
  char *kv;
  if (asprintf(&kv, "%s=%s", key, value) < 0)
    die("out of memory");
  for (int i = 0; i < opt.n_env; i++)
    if (strncmp(opt.env[i], kv, klen + 1) == 0) {
      opt.env[i] = kv;
      return;
    }
  if (opt.n_env == MAX_ENV)
    die("more than %d --setenv", MAX_ENV);
  opt.env[opt.n_env++] = kv;
}

static struct op *add_op(enum op_kind kind, const char *src, const char *dest) {
  if (opt.n_ops == MAX_OPS)
    die("more than %d mounts", MAX_OPS);
  if (dest[0] != '/')
    usage("the destination %s is not an absolute path", dest);
  opt.ops[opt.n_ops] = (struct op){kind, src, dest, NULL, NULL, 0, 0755};
  return &opt.ops[opt.n_ops++];
}

static long long number(const char *text, const char *what) {
  char *end;
  errno = 0;
  long long n = strtoll(text, &end, 10);
  if (errno || *end || end == text || n < 0)
    usage("%s takes a non-negative number", what);
  return n;
}

static int rlimit_number(const char *name) {
  static const struct { const char *name; int resource; } names[] = {
      {"as", RLIMIT_AS}, {"nproc", RLIMIT_NPROC}, {"cpu", RLIMIT_CPU}, {"fsize", RLIMIT_FSIZE},
      {"nofile", RLIMIT_NOFILE}, {"core", RLIMIT_CORE}, {"memlock", RLIMIT_MEMLOCK}, {"msgqueue", RLIMIT_MSGQUEUE}};
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (strcmp(names[i].name, name) == 0)
      return names[i].resource;
  usage("unknown resource limit %s", name);
}

static int descriptor(const char *text, const char *what) {
  long long fd = number(text, what);
  if (fd > 1 << 20)
    usage("%s takes a descriptor number, not %s", what, text);
  return (int)fd;
}

/* An option that sets one flag: whether `a` is one (and its flag is set). */
static int flag(const char *a) {
  static const struct { const char *name; int *flag; } flags[] = {
      {"--unshare-user", &opt.unshare_user}, {"--unshare-ipc", &opt.unshare_ipc},
      {"--unshare-pid", &opt.unshare_pid}, {"--unshare-net", &opt.unshare_net},
      {"--unshare-uts", &opt.unshare_uts}, {"--unshare-cgroup-try", &opt.unshare_cgroup},
      {"--disable-userns", &opt.disable_userns}, {"--assert-userns-disabled", &opt.assert_userns_disabled},
      {"--die-with-parent", &opt.die_with_parent}, {"--new-session", &opt.new_session}};
  for (int i = 0; i < (int)(sizeof flags / sizeof *flags); i++)
    if (strcmp(flags[i].name, a) == 0)
      return *flags[i].flag = 1;
  return 0;
}

/* The `n` arguments of option argv[*i], past which *i then points; usage() where there are fewer. */
static char **args_of(int argc, char **argv, int *i, int n) {
  if (*i + n >= argc)
    usage("%s takes more arguments", argv[*i]);
  *i += n;
  return argv + *i - n + 1;
}

static void parse(int argc, char **argv) {
  int cleared = 0;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
#define ARG(n) args_of(argc, argv, &i, n)
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    } else if (strcmp(a, "--version") == 0) {
      printf("%s\n", VERSION);
      exit(0);
    } else if (flag(a)) {
    } else if (strcmp(a, "--unshare-all") == 0) {
      opt.unshare_user = opt.unshare_ipc = opt.unshare_pid = opt.unshare_net = opt.unshare_uts = 1;
      opt.unshare_cgroup = 1;
    } else if (strcmp(a, "--clearenv") == 0) {
      opt.n_env = 0;
      cleared = 1;
    } else if (strcmp(a, "--userns") == 0) {
      opt.userns_fd = descriptor(ARG(1)[0], a);
    } else if (strcmp(a, "--uid") == 0 || strcmp(a, "--gid") == 0) {
      if (strcmp(ARG(1)[0], "0") != 0)
        usage("only id 0 inside is supported, not %s", argv[i]);
    } else if (strcmp(a, "--hostname") == 0) {
      opt.hostname = ARG(1)[0];
    } else if (strcmp(a, "--chdir") == 0) {
      opt.chdir_to = ARG(1)[0];
    } else if (strcmp(a, "--setenv") == 0) {
      char **v = ARG(2);
      set_env(v[0], v[1]);
    } else if (strcmp(a, "--bind") == 0 || strcmp(a, "--ro-bind") == 0) {
      char **v = ARG(2);
      add_op(a[2] == 'r' ? OP_RO_BIND : OP_BIND, v[0], v[1]);
    } else if (strcmp(a, "--overlay-src") == 0) {
      if (opt.overlay_src)
        usage("%s: one lower layer only", a);
      opt.overlay_src = ARG(1)[0];
    } else if (strcmp(a, "--overlay") == 0) {
      char **v = ARG(3);
      if (!opt.overlay_src)
        usage("%s needs --overlay-src first", a);
      struct op *o = add_op(OP_OVERLAY, opt.overlay_src, v[2]);
      o->upper = v[0];
      o->work = v[1];
      opt.overlay_src = NULL;
    } else if (strcmp(a, "--proc") == 0 || strcmp(a, "--dev") == 0) {
      add_op(a[2] == 'p' ? OP_PROC : OP_DEV, NULL, ARG(1)[0]);
    } else if (strcmp(a, "--cap-drop") == 0 || strcmp(a, "--cap-add") == 0) {
      const char *name = ARG(1)[0];
      int all = strcmp(name, "ALL") == 0, cap = all ? 0 : cap_number(name);
      if (!all && cap < 0)
        usage("unknown capability %s", name);
      unsigned long long bits = all ? ~0ULL : 1ULL << cap;
      opt.caps = a[6] == 'a' ? opt.caps | bits : opt.caps & ~bits;
    } else if (strcmp(a, "--seccomp") == 0) {
      opt.seccomp_fd = descriptor(ARG(1)[0], a);
    } else if (strcmp(a, "--size") == 0) {
      opt.next_size = (unsigned long long)number(ARG(1)[0], a);
    } else if (strcmp(a, "--perms") == 0) {
      char *end;
      long mode = strtol(ARG(1)[0], &end, 8);
      if (*end || mode < 0 || mode > 07777)
        usage("--perms takes an octal mode, not %s", argv[i]);
      opt.next_perms = (unsigned)mode;
    } else if (strcmp(a, "--tmpfs") == 0) {
      struct op *o = add_op(OP_TMPFS, NULL, ARG(1)[0]);
      o->size = opt.next_size;
      o->perms = opt.next_perms;
      opt.next_size = 0;
      opt.next_perms = 0755;
    } else if (strcmp(a, "--rlimit") == 0) { /* vf-sandbox's own: NAME VALUE, set on pid 1 */
      char **v = ARG(2);
      if (opt.n_limits == MAX_LIMITS)
        usage("more than %d --rlimit", MAX_LIMITS);
      opt.limits[opt.n_limits].resource = rlimit_number(v[0]);
      opt.limits[opt.n_limits++].value = (rlim_t)number(v[1], a);
    } else if (strcmp(a, "--join-cgroup") == 0 || strcmp(a, "--join-cgroup-try") == 0) { /* ours */
      if (opt.n_cgroups == MAX_CGROUPS)
        usage("more than %d --join-cgroup", MAX_CGROUPS);
      opt.cgroup_try[opt.n_cgroups] = a[13] == '-';
      opt.cgroup_fds[opt.n_cgroups++] = descriptor(ARG(1)[0], a);
    } else {
      usage("unsupported option %s (vf-sandbox takes the options the verifirst sandbox uses)", a);
    }
#undef ARG
  }
  if (i >= argc)
    usage("no command given");
  if (!cleared)
    usage("--clearenv is required");
  if (!opt.unshare_user && opt.userns_fd < 0)
    usage("a user namespace is required (--unshare-user or --userns)");
  if (!opt.unshare_pid || !opt.unshare_net || !opt.unshare_ipc || !opt.unshare_uts)
    usage("every namespace must be unshared (--unshare-all, or with --userns each --unshare-*)");
  if (opt.n_ops == 0 || strcmp(opt.ops[0].dest, "/") != 0 ||
      (opt.ops[0].kind != OP_BIND && opt.ops[0].kind != OP_OVERLAY))
    usage("the first mount must be the root (--bind DIR / or --overlay ... /)");
  opt.caps &= (1ULL << (CAP_LAST_CAP + 1)) - 1;
  opt.command = argv + i;
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    die("open %s", path);
  if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
    die("write %s", path);
  close(fd);
}

/* Our new user namespace: id 0 inside is `uid`/`gid` of the one above (and nothing else). */
static void map_root(unsigned uid, unsigned gid) {
  char map[64];
  write_file("/proc/self/setgroups", "deny");
  snprintf(map, sizeof map, "0 %u 1", uid);
  write_file("/proc/self/uid_map", map);
  snprintf(map, sizeof map, "0 %u 1", gid);
  write_file("/proc/self/gid_map", map);
}

/* The directory `path` (inside the new root: cwd) as an O_PATH fd, missing components created;
 * no component may be a symbolic link, so no mount lands outside. */
static int dest_dir(const char *path) {
  char buf[4096];
  if (strlen(path) >= sizeof buf)
    die("path too long: %s", path);
  strcpy(buf, path);
  int fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (char *part = strtok(buf, "/"); part; part = strtok(NULL, "/")) {
    if (strcmp(part, "..") == 0 || strcmp(part, ".") == 0)
      die("mount destination %s has . or ..", path);
    int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST)
        die("create the mount point %s", path);
      next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0)
      die("mount point %s (a component is not a directory, or is a symbolic link)", path);
    close(fd);
    fd = next;
  }
  return fd;
}

/* A regular file at `path` (absolute, inside the new root) as an O_PATH fd, created empty when
 * missing: its directories walked as dest_dir walks them, no symbolic link followed. */
static int dest_node(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash || slash[1] == 0 || snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path) >= (int)sizeof dir)
    die("mount point %s is not a file path", path);
  int d = dest_dir(dir[0] ? dir : "/");
  int f = openat(d, slash + 1, O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (f >= 0)
    close(f);
  f = openat(d, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (f < 0 || fstat(f, &st) != 0 || !S_ISREG(st.st_mode))
    die("mount point %s (not a regular file, or a symbolic link)", path);
  close(d);
  return f;
}

static int tree(const char *src, int recursive) {
  int fd = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | O_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
  if (fd < 0)
    die("bind %s", src);
  return fd;
}

static void set_attr(int tree_fd, unsigned long long attrs, int recursive, const char *what) {
  struct mount_attr attr = {.attr_set = attrs};
  if (syscall(SYS_mount_setattr, tree_fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr, sizeof attr) != 0)
    die("set the flags of %s", what);
}

static void attach(int tree_fd, int dest_fd, const char *what) {
  if (syscall(SYS_move_mount, tree_fd, "", dest_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    die("mount %s", what);
  close(tree_fd);
  close(dest_fd);
}

/* A bind of host `src` (the whole tree below it) at `dest`, nosuid, nodev, read-only when asked. */
static void bind_tree(const char *src, const char *dest, int read_only) {
  struct stat st;
  if (stat(src, &st) != 0)
    die("bind %s", src);
  int t = tree(src, 1);
  set_attr(t, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (read_only ? MOUNT_ATTR_RDONLY : 0), 1, src);
  attach(t, S_ISDIR(st.st_mode) ? dest_dir(dest) : dest_node(dest), dest);
}

/* The length of the directory prefix (through its last '/') that paths a and b share. */
static size_t common_dir(const char *a, const char *b) {
  size_t n = 0, i = 0;
  for (; a[i] && a[i] == b[i]; i++)
    if (a[i] == '/')
      n = i + 1;
  return n;
}

/* An overlay of op `o` (lower o->src, o->upper, o->work: host paths) mounted at `at`. Its layers
 * are named relative to the directory they share, so mountinfo shows no host path. */
static void mount_overlay(const struct op *o, const char *at) {
  char opts[8192];
  if (strchr(o->src, ',') || strchr(o->upper, ',') || strchr(o->work, ',') || strchr(o->src, ':'))
    die("overlay paths may not hold ',' or ':'");
  size_t n = common_dir(o->src, o->upper);
  size_t w = common_dir(o->src, o->work);
  n = w < n ? w : n;
  char dir[4096];
  int back = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (n == 0 || n >= sizeof dir || back < 0)
    die("overlay paths must be absolute");
  memcpy(dir, o->src, n);
  dir[n] = 0;
  if (chdir(dir) != 0)
    die("enter %s", dir);
  if (snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", o->src + n, o->upper + n,
               o->work + n) >= (int)sizeof opts)
    die("overlay paths too long");
  if (mount("overlay", at, "overlay", MS_NOSUID | MS_NODEV, opts) != 0)
    die("mount the overlay at %s", o->dest);
  if (fchdir(back) != 0)
    die("return from %s", dir);
  close(back);
}

/* Mount the root (op 0) on its own directory and make it the working directory. */
static void mount_root(const struct op *root) {
  const char *at = root->kind == OP_OVERLAY ? root->upper : root->src;
  if (root->kind == OP_OVERLAY) /* over its own upper directory: a path that exists, seen by nobody else */
    mount_overlay(root, at);
  else if (mount(at, at, NULL, MS_BIND | MS_REC, NULL) != 0 ||
           mount(NULL, at, NULL, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV, NULL) != 0)
    die("bind the root %s", at);
  if (chdir(at) != 0)
    die("enter the root %s", at);
}

/* A new file system of `type` at `dest`, as an O_PATH fd of its top. */
static int mount_new(const char *dest, const char *type, const char *what, unsigned long flags, const char *data) {
  int d = dest_dir(dest);
  char at[64];
  snprintf(at, sizeof at, "/proc/self/fd/%d", d);
  if (mount(type, at, type, flags, data) != 0)
    die("mount %s at %s", what, dest);
  close(d);
  return dest_dir(dest); /* the new mount now on top */
}

static void mount_proc(const char *dest) {
  int proc = mount_new(dest, "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  /* what bwrap covers read-only: the kernel's knobs that are not the namespace's */
  static const char *covered[] = {"sys", "sysrq-trigger", "irq", "bus"};
  for (int i = 0; i < 4; i++) {
    if (i == 0 && opt.unshare_net)
      continue; /* as bwrap: with a network namespace of its own, its sysctls stay the command's */
    int t = (int)syscall(SYS_open_tree, proc, covered[i], OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE);
    if (t < 0) {
      if (errno == ENOENT)
        continue;
      die("cover /proc/%s", covered[i]);
    }
    set_attr(t, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, 1, covered[i]);
    if (syscall(SYS_move_mount, t, "", proc, covered[i], MOVE_MOUNT_F_EMPTY_PATH) != 0)
      die("cover /proc/%s", covered[i]);
    close(t);
  }
  close(proc);
}

static void mount_dev(const char *dest) {
  /* sized: /dev holds mount points and links only, and a run must not fill memory through it */
  int dev = mount_new(dest, "tmpfs", "a tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k,nr_inodes=256");
  static const char *devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
  for (int i = 0; i < 6; i++) { /* on files made in the tmpfs just mounted: no path walked */
    char src[32];
    snprintf(src, sizeof src, "/dev/%s", devices[i]);
    int t = tree(src, 0), f = openat(dev, devices[i], O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    set_attr(t, MOUNT_ATTR_NOSUID, 0, src);
    if (f < 0 || syscall(SYS_move_mount, t, "", dev, devices[i], MOVE_MOUNT_F_EMPTY_PATH) != 0)
      die("mount %s", src);
    close(f);
    close(t);
  }
  static const char *links[][2] = {{"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"},
                                   {"/proc/self/fd/2", "stderr"}, {"/proc/self/fd", "fd"},
                                   {"/proc/kcore", "core"}, {"pts/ptmx", "ptmx"}};
  for (int i = 0; i < 6; i++)
    if (symlinkat(links[i][0], dev, links[i][1]) != 0)
      die("create /dev/%s", links[i][1]);
  if (mkdirat(dev, "shm", 0755) != 0 || mkdirat(dev, "pts", 0755) != 0)
    die("create /dev/shm and /dev/pts");
  char at[64];
  snprintf(at, sizeof at, "/proc/self/fd/%d/pts", dev);
  if (mount("devpts", at, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=620") != 0)
    die("mount devpts");
  close(dev);
}

static void build_root(void) {
  if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
    die("make the mount namespace a slave");
  mount_root(&opt.ops[0]);
  for (int i = 1; i < opt.n_ops; i++) {
    const struct op *o = &opt.ops[i];
    if (strcmp(o->dest, "/") == 0)
      die("only the first mount may be the root");
    switch (o->kind) {
    case OP_BIND:
    case OP_RO_BIND:
      bind_tree(o->src, o->dest, o->kind == OP_RO_BIND);
      break;
    case OP_PROC:
      mount_proc(o->dest);
      break;
    case OP_DEV:
      mount_dev(o->dest);
      break;
    case OP_TMPFS: {
      char data[96];
      int n = snprintf(data, sizeof data, "mode=%o", o->perms);
      if (o->size) /* else the kernel's default size */
        snprintf(data + n, sizeof data - (size_t)n, ",size=%llu", o->size);
      close(mount_new(o->dest, "tmpfs", "a tmpfs", MS_NOSUID | MS_NODEV, data));
      break;
    }
    case OP_OVERLAY: { /* copy-on-write over a host tree (/usr): the run may change it, the host never */
      int d = dest_dir(o->dest);
      char at[64];
      snprintf(at, sizeof at, "/proc/self/fd/%d", d);
      mount_overlay(o, at);
      close(d);
      break;
    }
    }
  }
  if (syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0)
    die("pivot_root into the new root");
  if (chdir("/") != 0)
    die("chdir /");
}

/* Per-uid kernel objects (inotify instances) count for the uid above too, which every run shares:
 * a run's own namespace is capped below the host's per-uid default (128), so it cannot starve another. */
static void cap_ucounts(void) {
  static const char *caps[][2] = {{"/proc/sys/user/max_inotify_instances", "16"},
                                   {"/proc/sys/user/max_inotify_watches", "8192"}};
  for (int i = 0; i < 2; i++) {
    int fd = open(caps[i][0], O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
      continue; /* a kernel without that count */
    if (fd < 0 || write(fd, caps[i][1], strlen(caps[i][1])) < 0)
      die("cap %s", caps[i][0]);
    close(fd);
  }
}

static void nested_userns(void) {
  /* this namespace may hold one more user namespace: the one the command runs in */
  write_file("/proc/sys/user/max_user_namespaces", "1");
  if (unshare(CLONE_NEWUSER) != 0)
    die("create the nested user namespace");
  map_root(0, 0);
}

static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct ifreq lo = {0};
  strcpy(lo.ifr_name, "lo");
  lo.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
  if (s < 0 || ioctl(s, SIOCSIFFLAGS, &lo) != 0)
    die("bring up the loopback interface");
  close(s);
}

/* Pid 1 checks in place, with no child: a success would leave it in a namespace it then dies in. */
static void assert_userns_disabled(void) {
  if (unshare(CLONE_NEWUSER) == 0 || (errno != ENOSPC && errno != EUSERS && errno != EPERM)) {
    errno = 0;
    die("creating user namespaces is not disabled in the namespace given by --userns");
  }
}

/* The bounding set: set once in pid 1, before the command is forked, which inherits it. */
static void bound_caps(unsigned long long keep) {
  for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
    if (!(keep & (1ULL << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      die("drop capability %d from the bounding set", cap);
}

/* Effective and permitted: `keep`; inheritable and ambient too when `pass_on` (the command's). */
static void keep_caps(unsigned long long keep, int pass_on) {
  struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {{0}};
  for (int k = 0; k < 2; k++) {
    data[k].effective = data[k].permitted = (unsigned)(keep >> (32 * k));
    data[k].inheritable = pass_on ? data[k].permitted : 0;
  }
  if (syscall(SYS_capset, &head, data) != 0)
    die("set capabilities");
  if (!pass_on)
    return; /* ambient: empty since the user namespace was entered */
  for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
    if ((keep & (1ULL << cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) != 0)
      die("raise ambient capability %d", cap);
}

/* The exit code of `pid`, as a shell gives it (128 + a killing signal), reaping whatever else ends. */
static int wait_for(pid_t pid) {
  int status;
  for (;;) {
    pid_t got = waitpid(-1, &status, 0);
    if (got == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (got < 0 && errno != EINTR)
      die("wait");
  }
}

/* The command's seccomp filter (--seccomp: bwrap's format), read by pid 1, installed by the
 * command last before its exec. */
static struct sock_fprog seccomp_prog;

static void read_seccomp(void) {
  if (opt.seccomp_fd < 0)
    return;
  static struct sock_filter code[4096];
  size_t got = 0;
  ssize_t n;
  while ((n = read(opt.seccomp_fd, (char *)code + got, sizeof code - got)) > 0 || (n < 0 && errno == EINTR))
    got += n > 0 ? (size_t)n : 0;
  if (n < 0)
    die("read the seccomp program");
  close(opt.seccomp_fd);
  if (got == 0 || got == sizeof code || got % sizeof *code)
    usage("the seccomp program is empty, too long, or not a whole number of instructions");
  seccomp_prog.len = (unsigned short)(got / sizeof *code);
  seccomp_prog.filter = code;
}

/* Limits on pid 1 itself, before anything else runs: every process of the run inherits them. */
static void set_limits(void) {
  for (int i = 0; i < opt.n_limits; i++) {
    struct rlimit r = {opt.limits[i].value, opt.limits[i].value};
    if (setrlimit(opt.limits[i].resource, &r) != 0)
      die("set resource limit %d", opt.limits[i].resource);
  }
}

/* Into the run's own cgroups, before the cgroup namespace is made, through files the owner
 * opened; the command never sees the descriptors. */
static void join_cgroups(void) {
  for (int i = 0; i < opt.n_cgroups; i++) {
    if (write(opt.cgroup_fds[i], "0\n", 2) != 2 && !opt.cgroup_try[i])
      die("join the run's cgroup");
    close(opt.cgroup_fds[i]);
  }
}

static void exec_command(void) {
  if (opt.die_with_parent)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
  const char *cwd = opt.chdir_to ? opt.chdir_to : "/";
  if (chdir(cwd) != 0)
    die("chdir %s", cwd);
  set_env("PWD", cwd); /* as bwrap: the initial environment names the directory it starts in */
  opt.env[opt.n_env] = NULL;
  environ = opt.env;
  if (seccomp_prog.len && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &seccomp_prog, 0, 0) != 0)
    die("install the seccomp filter");
  execvp(opt.command[0], opt.command);
  die("execvp %s", opt.command[0]);
}

/* The namespaces pid 1 makes for itself, not in its clone: the fork server clones one run after
 * another, and a network namespace alone takes longer to make than the rest of a clone. */
static void unshare_rest(void) {
  int flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  int done = unshare(flags | (opt.unshare_cgroup ? CLONE_NEWCGROUP : 0));
  if (done != 0 && opt.unshare_cgroup && errno == EINVAL) /* a kernel without cgroup namespaces */
    done = unshare(flags);
  if (done != 0)
    die("create the namespaces");
}

/* Pid 1: make the other namespaces, build the root, run the command as pid 2 and wait. Its own
 * user namespace (not given by --userns) maps id 0 to the ids of the process that cloned it. */
static int pid1(unsigned uid, unsigned gid) {
  if (opt.die_with_parent)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
  join_cgroups();
  set_limits();
  read_seccomp();
  if (opt.userns_fd < 0)
    map_root(uid, gid);
  unshare_rest();
  if (opt.unshare_net)
    loopback_up();
  build_root();
  if (opt.hostname && sethostname(opt.hostname, strlen(opt.hostname)) != 0)
    die("set the host name");
  cap_ucounts();
  if (opt.disable_userns)
    nested_userns();
  if (opt.assert_userns_disabled)
    assert_userns_disabled();
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    die("set no_new_privs");
  bound_caps(opt.caps);
  if (opt.new_session && setsid() < 0) /* as bwrap: pid 1 leads the session, the command is in it */
    die("setsid");
  /* Not dumpable from here on: its memory (the fork server's, which served other runs) cannot be
   * read or ptraced by the command, whose exec makes it dumpable again. */
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    die("make pid 1 not dumpable");
  pid_t command = fork();
  if (command < 0)
    die("fork the command");
  if (command == 0) {
    keep_caps(opt.caps, 1);
    exec_command();
  }
  keep_caps(0, 0);
  return wait_for(command);
}

/* Pid 1 of a new pid namespace, in a new user namespace too with `user` (fork-like). */
static long clone_pid1(int user) {
  return syscall(SYS_clone, CLONE_NEWPID | (user ? CLONE_NEWUSER : 0) | SIGCHLD, NULL, NULL, NULL, NULL);
}

/* Every signal at its default, however the host process was started (nohup, SIG_IGN inherited):
 * a run does not depend on it. vf-sandbox's main does it first: a fork server's runs inherit it
 * (bwrap: env --default-signal). */
void default_signals(void) {
  /* the kernel's call: glibc's refuses its own 32 and 33, which a host may have left ignored */
  unsigned long dfl[4] = {0}; /* SIG_DFL, no flags, empty mask, on every architecture's layout */
  for (int s = 1; s < NSIG; s++)
    syscall(SYS_rt_sigaction, s, dfl, NULL, 8); /* fails harmlessly for SIGKILL and SIGSTOP */
}

/* A run the fork server cloned as pid 1 (launcher_spawn), and the server's ids. */
static int cloned_as_pid1;
static unsigned server_uid, server_gid;

/* The launcher's main, for an exec of it or a request its fork server serves (_forkserver.c). */
int launch(int argc, char **argv) {
  sigset_t none; /* none blocked (a fork server blocks SIGCHLD), every one at its default (main) */
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, NULL) != 0)
    die("unblock the signals");
  parse(argc, argv);
  if (cloned_as_pid1) /* no --userns (launcher_spawn), so parse saw --unshare-user or --unshare-all */
    return pid1(server_uid, server_gid);
  if (opt.die_with_parent)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
  unsigned uid = (unsigned)getuid(), gid = (unsigned)getgid();
  if (opt.userns_fd >= 0) {
    if (syscall(SYS_setns, opt.userns_fd, CLONE_NEWUSER) != 0)
      die("enter the user namespace given by --userns");
    close(opt.userns_fd); /* bwrap leaves it open in the command; it has no use there */
  }
  long pid = clone_pid1(opt.userns_fd < 0);
  if (pid < 0)
    die("create the namespaces");
  if (pid == 0)
    _exit(pid1(uid, gid));
  return wait_for((pid_t)pid);
}

/* How the fork server (_forkserver.c) starts a request. Without --userns: cloned straight into a
 * new user and pid namespace, so the server is pid 1's monitor (*new_session 0: pid 1 makes its
 * own session). With --userns (an option's value that reads "--userns" counts too), or when the
 * clone fails (the monitor then reports why): a fork, whose main is the monitor. */
pid_t launcher_spawn(int argc, char **argv, int *new_session) {
  int given_userns = 0;
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
    given_userns = given_userns || strcmp(argv[i], "--userns") == 0;
  *new_session = 1;
  if (!given_userns) {
    server_uid = (unsigned)getuid();
    server_gid = (unsigned)getgid();
    long pid = clone_pid1(1);
    if (pid >= 0) {
      cloned_as_pid1 = pid == 0;
      *new_session = 0;
      return (pid_t)pid;
    }
  }
  return fork();
}
