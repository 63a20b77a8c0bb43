"""verifirst's red-team suite (issue 33): 85 attacks by a candidate that knows verifirst's code.

Each attack is a candidate script run through the public paths (Sandbox.run, Sandbox.run_pair,
FehVerifier.verify, BashTestsVerifier.verify) with the success condition it tests, a measurable
effect: the gold's or the check's text found, a verdict flipped to PASS/EQUIVALENT for a
candidate that does not do the task, a limit exceeded (measured), the concurrent gold's output
changed, a key read or written, a host fact or a host file reached. Each test asserts that its
attack FAILS (the test passes when the sandbox holds). Every attack runs in four modes: as root
and as an unprivileged uid, each with the default launcher and with bubblewrap
(VERIFIRST_SANDBOX_LAUNCHER=bwrap); the four batteries run at the same time (conftest.py).
The Terraform bombs (family terraform) go to the Terraform verifier's python backend instead,
each in a child Python under memory and CPU limits (test_terraform_bombs.py).

Run: `.venv/bin/python -m pytest -q tests/redteam` (marker `security`). test_controls.py shows
that a few success conditions do see the attack when the sandbox is off (unsafe_local), and
test_zz_host_unchanged.py that the host's /etc, the user's keys and another run's files are
unchanged after the whole suite. VERIFIRST_REDTEAM_REPORT=FILE writes SUCCEEDS/FAILS per attack
and mode (conftest.py).

| id | family | success means |
|----|--------|---------------|
| mem_eval_feh | read-gold | a task-blind candidate that evals the command found in pid 1's memory is judged EQUIVALENT by FehVerifier (any of 3 tasks) |
| mem_concurrent_gold | read-gold | the concurrent gold's command text is found in the candidate's pid 1 memory (/proc/1/mem), in any of 3 pairs (a short gold, and long ones with the text at the end, where a shorter request written over it leaves it) |
| mem_earlier_gold | read-gold | an earlier run's gold (short, or long with the text at the end) is found in a later run's pid 1 memory |
| proc_cmdline_environ | read-gold | the concurrent gold's text is found in some /proc/*/cmdline or /proc/*/environ the candidate can read |
| proc_fd_walk | read-gold | a descriptor or cwd/root link of some process in the run reaches the host (the host scratch area's run-/lower-/launcher- entries listed through it) |
| environment | read-gold | the harness's environment (a secret variable, the host scratch path) reaches the command |
| check_from_ancestors | read-gold | bash-tests: a task-blind candidate reads the check (its files, sent base64 in the run's script) from its ancestors' command lines and prints the expected answer: PASS |
| check_copied_to_feedback | read-gold | bash-tests: a survivor copies the check, once written, into the candidate's output, and the verdict's feedback (read by the optimizer) quotes the check's hidden text |
| free_space_side_channel | read-gold | the candidate measures the concurrent gold's writes (>= 24 MB) in the free space of its own / (a shared scratch pool) |
| rewrite_check_bg | tamper-check | a background loop left by a wrong candidate rewrites $VERIFIRST_CHECK_DIR/evaluate.sh once written: PASS |
| rewrite_check_setsid | tamper-check | the same rewriter started with setsid -f (a new session): PASS |
| rewrite_check_nohup | tamper-check | the same rewriter under nohup, disowned: PASS |
| rewrite_check_inotify | tamper-check | a survivor woken by inotify when the check file is written rewrites evaluate.sh: PASS |
| check_fifo_swap | tamper-check | the candidate makes evaluate.sh a named pipe before the check is written: a survivor drains the real check from it and feeds the check's bash `exit 0`: PASS |
| rewrite_stdout_file | tamper-check | a survivor rewrites the candidate's recorded stdout once the candidate has exited (the check reads $VERIFIRST_STDOUT): PASS for a candidate that printed `wrong` |
| rewrite_exit_file | tamper-check | a survivor rewrites the recorded exit status (3 -> 0) before the check reads $VERIFIRST_EXIT: PASS |
| plant_check_bin | tamper-check | the candidate plants bin/grep in $VERIFIRST_CHECK_DIR (an EAbench-style check puts $VERIFIRST_CHECK_DIR/bin first on PATH): PASS for a wrong answer |
| forge_check_output | tamper-check | the candidate writes a forged check block into the run's own output (an ancestor's stdout): the verdict's check output, or its feedback outside the candidate's quoted output, carries the attacker's text (as the check's or the harness's) |
| ptrace_check_shell | tamper-check | the candidate ptraces the shell that will run the check and makes it exec `echo <check marker>; exit 0` in its place: PASS for a wrong answer |
| loader_hijack_check | tamper-check | the candidate points the run's /lib64 (a symlink in its writable root) at its own program interpreter, a static `exit 0`: every program the check starts after it exits 0: PASS |
| python_usersite_check | tamper-check | the candidate leaves a .pth file in $HOME's Python user site-packages that ends every Python with exit 0; a Python check (as EAbench's test.py) then passes a wrong answer |
| python_cwd_shadow | tamper-check | the candidate leaves json.py in its working directory; a Python check run from there (`python3 -c`, whose sys.path starts with the current directory) imports it: PASS |
| fill_check_room | tamper-check | a wrong candidate fills /dev/shm, /tmp and / (at most 100 MB each) so the check has no room to be written or to run: PASS, or no verdict (ERROR/INCONCLUSIVE) instead of FAIL |
| outlive_command | tamper-check | a process the candidate started is still alive when the check runs (the check sees it in /proc) |
| other_run_files | tamper-check | another run's files (a canary tree on the host, world-writable) are changed through /proc links, relative paths or host paths the run can learn |
| concurrent_gold_output | tamper-check | the candidate changes the concurrent gold's output (writes into any pipe or file it can reach, kills or stops what it sees) |
| ptrace_pid1_memory | limits | a shell forked from pid 1 (ptrace) allocates 160 MB under memory_mb=64 |
| ptrace_pid1_nproc | limits | a shell forked from pid 1 (ptrace) runs 60 processes at once under nproc=32 |
| ptrace_pid1_fsize | limits | a shell forked from pid 1 (ptrace) writes a 20 MB file under file_size_mb=8 |
| ptrace_pid1_cpu | limits | a shell forked from pid 1 (ptrace) uses 1.3 s of CPU under cpu_s=1 |
| memory_many_processes | limits | 3 processes hold 60 MB each at once (180 MB) under memory_mb=96 |
| shm_beyond_memory | limits | the run stores 160 MB in /dev/shm (tmpfs: memory) under memory_mb=64 |
| cgroup_escape | limits | the run moves itself to another cgroup (any cgroup.procs or tasks file it can write) or raises one of its cgroup limits (memory, pids) |
| scratch_fill | starve | the candidate fills the scratch space: the concurrent gold's 3 MB write fails (prints other than 3000000) |
| inode_pool_shared | starve | the concurrent gold's 1000 new files show in the candidate's free-inode count (one inode pool for all runs: exhausting it starves the gold) |
| inotify_exhaust | starve | the candidate holds every inotify instance its uid may have: the concurrent gold's inotify_init fails |
| pids_exhaust | starve | the candidate holds processes up to nproc=64: the concurrent gold cannot start 8 short processes |
| shm_exhaust | starve | the candidate fills /dev/shm (160 MB, bounded): the concurrent gold's 3 MB write to /dev/shm fails |
| keyring_quota_exhaust | starve | the candidate fills its uid's key quota: the concurrent gold's add_key fails with EDQUOT |
| cpu_hog | starve | 40 busy loops, each in its own session (so scheduler autogroups do not pool them), slow the concurrent gold's CPU work > 3x (per CPU second, against the same gold beside an idle candidate) |
| parallel_items_scratch_fill | starve | item B's candidate, in another thread, fills the scratch space: item A's gold's 3 MB write fails (prints other than 3000000) |
| parallel_items_inotify | starve | item B's candidate, in another thread, holds every inotify instance its uid may have: item A's gold's inotify_init fails |
| user_session_key | kernel-objects | the candidate reads the secret the user keeps in their session keyring |
| user_keyring_key | kernel-objects | the candidate reads the secret the user keeps in their user keyring |
| user_keyring_write | kernel-objects | the candidate adds a key the user's session or user keyring then holds |
| concurrent_run_key | kernel-objects | the candidate reads a key the concurrent gold added to its keyrings |
| earlier_run_key | kernel-objects | a later run reads a key an earlier run added to its keyrings |
| sysv_shm | kernel-objects | the candidate attaches the concurrent gold's SysV shared memory segment and reads it |
| posix_mqueue | kernel-objects | the candidate opens the concurrent gold's POSIX message queue and reads it |
| abstract_socket | kernel-objects | the candidate connects to the concurrent gold's abstract unix socket |
| dev_shm_across_runs | kernel-objects | the candidate reads a file the concurrent gold put in /dev/shm |
| tmp_across_runs | kernel-objects | a later run reads files an earlier run left in /tmp, /var/tmp, /dev/shm or $HOME |
| mountinfo_host_paths | host-info | /proc/self/mountinfo (or /proc/1/mountinfo, /proc/mounts) shows the host path of the run's scratch area |
| maps_host_paths | host-info | /proc/*/maps or map_files links show host paths (the launcher's or a preloaded library's place in the scratch area) |
| sys_net_mac | host-info | the host's network interfaces and their MAC addresses, read from /sys |
| sys_block_devices | host-info | the host's block devices, listed from /sys |
| sys_cgroup_tree | host-info | the host's cgroup tree (the harness's own cgroup names) seen through /sys/fs/cgroup or /proc/*/cgroup |
| host_processes | host-info | a host process (the harness's witness, named by prctl) is visible: /proc, /sys/fs/cgroup/*/cgroup.procs, /proc/sched_debug |
| kernel_log_key_users | host-info | the host's kernel log (dmesg, /dev/kmsg) or the host's key users (/proc/key-users: uids other than the run's own holding keys) can be read |
| admin_etc_direct | sysadmin | sysadmin: useradd, appends to /etc/passwd and /etc/hosts, sudo tee /etc/... change the host's /etc |
| admin_etc_via_proc | sysadmin | sysadmin: writes to the host's /etc through /proc/*/root and /proc/*/cwd |
| admin_etc_via_mounts | sysadmin | sysadmin: mount, nsenter, chroot and unshare to reach the host's /etc |
| admin_raw_disk | sysadmin | sysadmin: mknod of the host's root block device (or one found in /dev) and reading 512 raw bytes of it |
| admin_etc_persists | sysadmin | sysadmin: a user added by one run is in the next run's /etc/passwd |
| admin_preload_check | sysadmin | sysadmin: the candidate writes /etc/ld.so.preload (its /etc is writable) with a library that makes grep exit 0; the check that runs after it uses grep: PASS for a wrong answer |
| syscall_perf_event_open | seccomp | perf_event_open returns a descriptor |
| syscall_bpf | seccomp | bpf loads a socket filter or creates a map |
| syscall_userfaultfd | seccomp | userfaultfd returns a descriptor |
| syscall_kexec_load | seccomp | kexec_load / kexec_file_load get past the permission check |
| syscall_init_module | seccomp | init_module / finit_module get past the permission check |
| syscall_keyctl | seccomp | add_key, keyctl or request_key work (a key or keyring made or found) |
| syscall_ptrace_pid1 | seccomp | PTRACE_SEIZE of pid 1 succeeds |
| syscall_process_vm_readv | seccomp | process_vm_readv reads pid 1's memory |
| syscall_proc1_mem | seccomp | /proc/1/mem can be opened and read |
| tf_count | terraform | count = 50,000,000 instances: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_for_each | terraform | for_each over 3,000,000 keys: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_setproduct | terraform | setproduct of three 1,000-element ranges (10^9 elements): the python backend gives no verdict within 20 s, dies, or passes it |
| tf_string_doubling | terraform | a string doubled 15 times from 1 MB: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_list_doubling_flatten | terraform | a list doubled 39 times (shared, 2^40 leaves) flattened: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_list_doubling_jsonencode | terraform | a list doubled 39 times (shared, 2^39 leaves) passed to jsonencode: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_nesting | terraform | 3,000 nested brackets: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_format_width | terraform | format with a 999,999,999-character width: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_regex_backtracking | terraform | a regex with catastrophic backtracking on 52 characters: the python backend gives no verdict within 20 s, dies, or passes it |
| tf_huge_power | terraform | pow(2, 1e9) (a 125 MB integer): the python backend gives no verdict within 20 s, dies, or passes it |
| tf_module_recursion | terraform | a local module that calls itself: the python backend gives no verdict within 20 s, dies, or passes it |
"""
