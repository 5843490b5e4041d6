"""python3 rusage.py CMD ARGS...: runs CMD (its stdout and stderr are this process's) and
then prints, as the last line of stderr, `rusage: WALL_MS CPU_MS EXIT` (from fork to
wait; CPU is user + sys of CMD, microseconds from wait4). Node's spawnSync gives no
child's CPU time; the CLI rows of scripts/bench/cli.mjs print it beside the wall time."""
import os, sys, time

t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = (time.perf_counter() - t0) * 1000
code = os.waitstatus_to_exitcode(status)
sys.stderr.write(f"\nrusage: {wall:.3f} {(ru.ru_utime + ru.ru_stime) * 1000:.3f} {code}\n")
sys.exit(0)
