# SPDX-License-Identifier: Apache-2.0

"""Text digest of an Nsight Compute report, for reading a kernel's profile off the GPU machine.

    ncu --set full --import-source yes -k regex:KERNEL -s 3 -c 1 -f -o /tmp/prof APP ARGS...
    python3 bench/cuda/ncu_digest.py /tmp/prof.ncu-rep > digest.txt

Prints the details lines that matter for a latency-bound kernel (duration, IPC, occupancy,
eligible warps, registers, shared memory), the PC-sampling stall reasons over the whole kernel,
the SASS opcodes by stall samples and by executed instructions, and the hottest instructions
with their two largest stall reasons. Needs ncu on the PATH (the GPU machine has it).
"""
from __future__ import annotations

import collections
import csv
import io
import subprocess
import sys

DETAIL_KEYS = ("Duration", "Registers Per", "Achieved Occupancy", "Executed Ipc",
               "Issue Slots Busy", "DRAM Throughput", "Warp Cycles Per Issued",
               "Executed Instructions ", "L1/TEX Hit", "L2 Hit", "No Eligible",
               "Active Warps Per Scheduler", "Eligible Warps", "Shared Memory", "Block Limit Reg")


def ncu(report: str, *args: str) -> str:
    return subprocess.run(["ncu", "-i", report, *args], capture_output=True, text=True).stdout


def number(text: str) -> float:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0


def csv_rows(text: str, header_marker: str) -> tuple[list, list]:
    """The header row containing header_marker and the rows after it (ncu prints notes first)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if header_marker in line), None)
    if start is None:
        return [], []
    reader = csv.reader(io.StringIO("\n".join(lines[start:])))
    header = next(reader)
    return header, list(reader)


def main() -> int:
    report = sys.argv[1]
    for line in ncu(report, "--page", "details").splitlines():
        if any(key in line for key in DETAIL_KEYS):
            print(line.rstrip()[:200])

    header, rows = csv_rows(ncu(report, "--page", "raw", "--csv"), "smsp__pcsamp")
    if rows:
        values = rows[-1]  # the kernel's row (a units row may come first)
        stalls = [(name, number(value)) for name, value in zip(header, values)
                  if "pcsamp_warps_issue_stalled" in name and not name.endswith("not_issued")]
        total = sum(value for _, value in stalls) or 1.0
        print("stall reasons (PC sampling, share of samples):")
        for name, value in sorted(stalls, key=lambda item: -item[1])[:14]:
            reason = name.replace("smsp__pcsamp_warps_issue_stalled_", "")
            print(f"  {reason:28s} {100 * value / total:5.1f}%")

    header, rows = csv_rows(ncu(report, "--page", "source", "--csv", "--print-source", "sass"),
                            '"Address"')
    if not rows:
        print("no SASS source page (was the report taken with --import-source yes?)")
        return 0
    records = [dict(zip(header, row)) for row in rows]
    samples = next(c for c in header if c.startswith("Warp Stall Sampling (All"))
    executed = next(c for c in header if c.startswith("Instructions Executed"))
    stall_columns = [c for c in header if c.startswith("stall_") and "Not Issued" not in c]
    by_samples, by_executed = collections.Counter(), collections.Counter()
    for record in records:
        tokens = record.get("Source", "").split()
        if not tokens:
            continue
        opcode = tokens[1] if tokens[0].startswith("@") and len(tokens) > 1 else tokens[0]
        by_samples[opcode] += number(record[samples])
        by_executed[opcode] += number(record[executed])
    total_samples = sum(by_samples.values()) or 1.0
    total_executed = sum(by_executed.values()) or 1.0
    print(f"warp instructions executed {total_executed:.0f}, stall samples {total_samples:.0f}")
    print("opcode                     samples  executed")
    for opcode, value in by_samples.most_common(28):
        share = 100 * by_executed[opcode] / total_executed
        print(f"  {opcode:24s} {100 * value / total_samples:6.1f}% {share:6.1f}%")
    print("hottest instructions (share of samples, times executed, two largest stalls):")
    for record in sorted(records, key=lambda r: -number(r[samples]))[:30]:
        top = sorted(((number(record[c]), c) for c in stall_columns), reverse=True)[:2]
        reasons = ", ".join(f"{name} {value:.0f}" for value, name in top)
        share = 100 * number(record[samples]) / total_samples
        source = record.get("Source", "").strip()[:60]
        print(f"  {share:5.1f}% {number(record[executed]):9.0f} {source}  [{reasons}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
