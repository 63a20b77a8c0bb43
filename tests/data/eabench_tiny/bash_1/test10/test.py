"""Runs the script the way the benchmark's bash_1 container does, writes the result JSON."""
import json
import os
import subprocess


def main():
    run = subprocess.run(["bash", "test10.sh"], capture_output=True, text=True)
    ok = run.stderr == "" and os.path.isfile("done.flag")
    with open("output/results_test10.json", "w") as f:
        json.dump({"result": "Pass" if ok else "Fail", "returncode": run.returncode,
                   "stdout": run.stdout, "stderr": run.stderr}, f)


if __name__ == "__main__":
    main()
