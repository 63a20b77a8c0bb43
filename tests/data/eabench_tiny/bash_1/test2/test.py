"""Runs the script the way the benchmark's bash_1 container does, writes the result JSON."""
import json
import os
import subprocess


def main():
    run = subprocess.run(["bash", "test2.sh"], capture_output=True, text=True)
    ok = run.stderr == "" and run.stdout.strip() == "2"
    with open("output/results_test2.json", "w") as f:
        json.dump({"result": "Pass" if ok else "Fail", "returncode": run.returncode,
                   "stdout": run.stdout, "stderr": run.stderr}, f)


if __name__ == "__main__":
    main()
