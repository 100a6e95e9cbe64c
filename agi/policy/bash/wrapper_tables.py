"""The tables of agi.policy.bash.wrappers (docs: permissions): wrappers and their options,
shells, runners, the reason each is followed, safe shell options and reserved words."""

from __future__ import annotations

import re

# wrapper: (flags, options taking a value, positional words before the command)
WRAPPERS: dict[str, tuple[frozenset[str], frozenset[str], int]] = {
    "time": (  # the keyword, and GNU time (/usr/bin/time) by the same name
        frozenset({"-p", "-v", "-a", "-q", "--verbose", "--append", "--portability", "--quiet"}),
        frozenset({"-f", "-o", "--format", "--output"}),
        0,
    ),
    "nohup": (frozenset(), frozenset(), 0),
    "builtin": (frozenset(), frozenset(), 0),
    "coproc": (frozenset(), frozenset(), 0),
    "busybox": (frozenset(), frozenset(), 0),
    "toybox": (frozenset(), frozenset(), 0),
    "nice": (frozenset(), frozenset({"-n", "--adjustment"}), 0),
    "exec": (frozenset({"-c", "-l"}), frozenset({"-a"}), 0),
    "command": (frozenset({"-p"}), frozenset(), 0),
    "setsid": (frozenset({"-c", "--ctty", "-f", "--fork", "-w", "--wait"}), frozenset(), 0),
    "stdbuf": (frozenset(), frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "timeout": (
        frozenset({"--preserve-status", "--foreground", "-v", "--verbose"}),
        frozenset({"-s", "--signal", "-k", "--kill-after"}),
        1,
    ),
    "env": (
        frozenset({"-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"}),
        frozenset({"-u", "--unset", "-C", "--chdir"}),
        0,
    ),
    "sudo": (
        frozenset(
            {"-E", "-H", "-n", "-P", "-S", "-b", "-k", "--preserve-env", "--non-interactive"}
        ),
        frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user"}),
        0,
    ),
    "doas": (frozenset({"-n"}), frozenset({"-u", "-C"}), 0),
    "ionice": (frozenset({"-t"}), frozenset({"-c", "-n", "-p", "-P", "-u"}), 0),
    "xargs": (
        frozenset({"-0", "--null", "-r", "--no-run-if-empty", "-t", "--verbose", "-p", "-x"})
        | frozenset({"--interactive", "--exit", "-o", "--open-tty"}),
        frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n", "-P", "-s"})
        | frozenset({"--max-args", "--max-procs", "--max-chars", "--process-slot-var", "-e"}),
        0,
    ),
}
# more programs that run the command after their options (an option not listed: unreducible)
WRAPPERS |= {
    name: (frozenset(flags.split()), frozenset(valued.split()), positional)
    for name, flags, valued, positional in (
        ("chroot", "--skip-chdir", "--userspec --groups", 1),
        ("taskset", "-a --all-tasks -c --cpu-list", "", 1),
        ("strace", "-f -ff -c -C -T -t -tt -ttt -y -yy -q -qq -v -x -xx -r -i -k -w -z -Z -n",
         "-o -e -s -u -E -P -a -b -I -O -S -X -U", 0),
        ("ltrace", "-f -c -C -i -L -r -S -t -tt -ttt -T", "-o -e -s -u -n -l -x -A -D -F", 0),
        ("unshare", "-m -u -i -n -p -U -C -T -f -r -c --fork --map-root-user --mount --uts "
         "--ipc --net --pid --user --cgroup --time --mount-proc --kill-child "
         "--map-current-user", "-R -w --root --wd -S -G --setuid --setgid", 0),
        ("nsenter", "-a -m -u -i -n -p -U -C -T -r -w -F --all --mount --uts --ipc --net --pid "
         "--user --cgroup --preserve-credentials --no-fork", "-t --target -S -G", 0),
        ("setpriv", "--clear-groups --keep-groups --init-groups --no-new-privs --reset-env",
         "--reuid --regid --ruid --rgid --euid --egid --groups --inh-caps --ambient-caps "
         "--bounding-set --securebits --pdeathsig --selinux-label --apparmor-profile", 0),
        ("prlimit", "--verbose --raw --noheadings", "--as --core --cpu --data --fsize --locks "
         "--memlock --msgqueue --nice --nofile --nproc --rss --rtprio --rttime --sigpending "
         "--stack", 0),
        ("chrt", "-f -r -o -b -i -d -a -m -v -R --fifo --rr --other --batch --idle --deadline",
         "-T -P -D", 1),
        ("numactl", "-l --localalloc", "-C -N -m -i -p --physcpubind --cpunodebind --membind "
         "--interleave --preferred", 0),
        ("fakeroot", "-u --unknown-is-real", "-l --lib --faked -i -s -b", 0),
        ("faketime", "-f", "-m -p", 1),
        ("unbuffer", "-p", "", 0),
        ("rlwrap", "", "", 0),
        ("firejail", "", "", 0),
        ("pkexec", "--disable-internal-agent --keep-cwd", "--user", 0),
        ("dbus-run-session", "", "--config-file --dbus-daemon", 0),
        ("xvfb-run", "-a --auto-servernum", "-n --server-num -s --server-args -e --error-file "
         "-f --auth-file -p --xauth-protocol -w --wait", 0),
        ("valgrind", "-q -v --quiet --verbose", "--tool --log-file --leak-check "
         "--track-origins --show-leak-kinds --error-exitcode --trace-children --suppressions", 0),
        ("catchsegv", "", "", 0),
        ("nocache", "", "", 0),
        ("torsocks", "-i -d -q --isolate --debug --quiet", "-u -p -a -P --user --pass "
         "--address --port", 0),
        ("proxychains", "-q", "-f", 0),
        ("proxychains4", "-q", "-f", 0),
        ("cgexec", "--sticky", "-g", 0),
    )
}  # fmt: skip
# programs that run commands from their arguments in ways not followed here: unreducible
OPAQUE = frozenset({"parallel", "sem", "systemd-run", "run-one", "nq", "tsp"})
# programs whose `-c STRING` (`--command=STRING`) is a shell line; without it they read stdin
DASH_C = frozenset({"su", "runuser", "script", "flock", "sg"})
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
SHELL_VALUE_OPTIONS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
RUNNERS = (
    frozenset(  # commands that run what their arguments name
        {"eval", "trap", "watch", "find", "exec", "source", ".", "command", "builtin"}
    )
    | WRAPPERS.keys()
    | DASH_C
    | OPAQUE
)
FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
# why each program above is followed (the permissions page lists them; docs: permissions)
WHY: dict[str, str] = {
    "time": "times the command it runs",
    "nohup": "runs a command immune to hangups",
    "builtin": "runs a builtin by name",
    "coproc": "runs a command as a coprocess",
    "busybox": "runs the applet named first",
    "toybox": "runs the applet named first (a multi-call binary, as busybox)",
    "nice": "runs a command at another priority",
    "exec": "replaces the shell with a command",
    "command": "runs a command, skipping functions",
    "setsid": "runs a command in a new session",
    "stdbuf": "runs a command with other buffering",
    "timeout": "runs a command with a time limit",
    "env": "runs a command in a changed environment",
    "sudo": "runs a command as another user",
    "doas": "runs a command as another user",
    "ionice": "runs a command at another I/O priority",
    "xargs": "runs a command with arguments from its input",
    "chroot": "runs a command in another root",
    "taskset": "runs a command on chosen CPUs",
    "strace": "traces the command it runs",
    "ltrace": "traces the command it runs",
    "unshare": "runs a command in new namespaces",
    "nsenter": "runs a command in other namespaces",
    "setpriv": "runs a command with other privileges",
    "prlimit": "runs a command with other limits",
    "chrt": "runs a command with another scheduling policy",
    "numactl": "runs a command on chosen nodes",
    "fakeroot": "runs a command as a pretend root",
    "faketime": "runs a command at another time",
    "unbuffer": "runs a command in a pseudo-terminal",
    "rlwrap": "runs a command with line editing",
    "firejail": "runs a command in a sandbox",
    "pkexec": "runs a command as another user",
    "dbus-run-session": "runs a command with a session bus",
    "xvfb-run": "runs a command with a virtual display",
    "valgrind": "runs a command under a checker",
    "catchsegv": "runs a command, reporting crashes",
    "nocache": "runs a command bypassing the page cache",
    "torsocks": "runs a command through Tor",
    "proxychains": "runs a command through proxies",
    "proxychains4": "runs a command through proxies",
    "cgexec": "runs a command in a control group",
    "su": "`-c LINE` runs a shell line as another user",
    "runuser": "`-c LINE` or `-u USER CMD` runs a command",
    "script": "`-c LINE` runs a shell line, recording it",
    "flock": "runs a command or `-c LINE` holding a lock",
    "sg": "runs a shell line with another group",
    "eval": "runs its arguments as a shell line",
    "trap": "runs a shell line on a signal",
    "watch": "runs a shell line again and again",
    "find": "`-exec`, `-execdir`, `-ok`, `-okdir` run a command per file",
    "source": "runs a file's commands in this shell",
    ".": "runs a file's commands in this shell",
    **{
        shell: "`-c LINE` runs a shell line; with no script it reads commands from its input"
        for shell in sorted(SHELLS)
    },
    **{name: "runs commands in ways not followed here (unreducible)" for name in sorted(OPAQUE)},
}
SAFE_SHOPTS = frozenset(
    {"globstar", "nullglob", "dotglob", "extglob", "failglob", "nocaseglob", "nocasematch"}
    | {"lastpipe", "globasciiranges", "checkwinsize", "histappend", "inherit_errexit"}
)
RESERVED = frozenset(
    {"{", "}", "(", ")", "!", "[[", "]]", "if", "then", "else", "elif", "fi", "case", "esac"}
    | {"for", "while", "until", "do", "done", "in", "function", "select", "coproc", "time"}
)
