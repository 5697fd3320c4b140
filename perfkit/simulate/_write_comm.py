"""The communication files of a simulated rank: ``communication.json`` (time and bandwidth
per operator, ring factors for the bytes on the wire) and ``communication_matrix.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._engine import CommOp, RankResult, Simulation, link_transport
from ._write_headers import LOCAL_GBPS, TRANSPORTS, _abs_us_float

__all__: list[str] = []


def _ring_factor(op: str, n: int) -> float:
    if op == "allReduce":
        return 2 * (n - 1) / n
    if op in ("reduceScatter", "allGather"):
        return (n - 1) / n
    return 1.0


def _bw_info(c: CommOp, sent: float, links: int = 1) -> dict[str, Any]:
    """The bandwidth info of ``c``: its transit time times the ``links`` it used at once,
    as CANN sums an operation's copy tasks, one per link (a full-mesh node's HCCS)."""
    info: dict[str, Any] = {}
    transit_ms = c.transit * links / 1000.0
    for tr in TRANSPORTS:
        used = tr == c.transport or (tr == "SDMA" and c.transport == "HCCS")
        if used and transit_ms > 0:
            mb = sent / 1e6
            packet = round(min(mb, 8.388608), 6)
            count = max(1, int(np.ceil(mb / packet))) if packet else 0
            info[tr] = {"Transit Size(MB)": mb, "Transit Time(ms)": transit_ms,
                        "Bandwidth(GB/s)": round(mb / 1000.0 / (transit_ms / 1000.0), 4),
                        "Large Packet Ratio": 0.0 if tr == "SDMA" else 1.0,
                        "Size Distribution": {} if tr == "SDMA" else
                        {str(packet): [count, transit_ms]}}
        else:
            info[tr] = {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                        "Large Packet Ratio": 0, "Size Distribution": {}}
    return info


def _time_info(c: CommOp, abs_start: bool = True) -> dict[str, Any]:
    el, tr, wa = c.elapse / 1000.0, c.transit / 1000.0, max(c.wait, 0.0) / 1000.0
    idle = max(el - tr - wa, 0.0)
    info: dict[str, Any] = {}
    if abs_start:
        info["Start Timestamp(us)"] = _abs_us_float(c.start)
    info.update({"Elapse Time(ms)": el, "Transit Time(ms)": tr, "Wait Time(ms)": wa,
                 "Synchronization Time(ms)": wa, "Idle Time(ms)": idle,
                 "Wait Time Ratio": round(wa / (wa + tr), 4) if wa + tr else 0,
                 "Synchronization Time Ratio": round(wa / (wa + tr), 4) if wa + tr else 0})
    return info


def _communication(sim: Simulation, res: RankResult, names: list[str],
                   hashes: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    comm_json: dict[str, Any] = {}
    matrix: dict[str, Any] = {}
    mesh = sim.hardware.topology.mesh
    for step, _, _ in res.host_steps:
        key = f"step{step}"
        kinds: dict[str, dict[str, Any]] = {"p2p": {}, "collective": {}}
        mat: dict[str, dict[str, Any]] = {"p2p": {}, "collective": {}}
        totals: dict[str, dict[str, float]] = {"p2p": {}, "collective": {}}
        by_type: dict[tuple[str, str, str], list[tuple[float, dict[str, Any]]]] = {}
        for c, name in zip(res.comm, names, strict=True):
            if c.step != step:
                continue
            g = hashes[c.group]
            ranks = list(sim.groups[c.group]["global_ranks"])  # type: ignore[arg-type]
            sent = c.size_bytes * _ring_factor(c.op, len(ranks))
            on_links = len(c.peers) if mesh and c.transport == "HCCS" else 1
            entry = {"Communication Time Info": _time_info(c),
                     "Communication Bandwidth Info": _bw_info(c, sent, on_links)}
            kinds[c.kind][f"{name}@{g}"] = entry
            tot = totals[c.kind]
            for f_ in ("elapse", "transit", "wait"):
                tot[f_] = tot.get(f_, 0.0) + getattr(c, f_)
            tot[c.transport] = tot.get(c.transport, 0.0) + sent
            tot[c.transport + "_t"] = tot.get(c.transport + "_t", 0.0) + c.transit * on_links
            me = ranks.index(res.rank)
            links: dict[str, Any] = {}
            per_peer = sent / max(len(c.peers), 1)
            for q in c.peers:
                bw = c.link_gbps[q]
                src, dst = (me, ranks.index(q)) if c.op != "receive" else (ranks.index(q), me)
                # each link its own transport: HCCS inside a node, RDMA across nodes
                kind = link_transport(sim.hardware, res.rank, q)
                links[f"{src}-{dst}"] = {"Transport Type": kind,
                                         "Transit Size(MB)": per_peer / 1e6,
                                         "Transit Time(ms)": per_peer / (bw * 1e9) * 1e3,
                                         "Bandwidth(GB/s)": round(bw, 4), "Op Name": name}
            links[f"{me}-{me}"] = {"Transport Type": "LOCAL",
                                   "Transit Size(MB)": per_peer / 1e6,
                                   "Transit Time(ms)": per_peer / (LOCAL_GBPS * 1e9) * 1e3,
                                   "Bandwidth(GB/s)": LOCAL_GBPS, "Op Name": name}
            by_type.setdefault((c.kind, c.op.lower(), g), []).append((c.transit, links))
        for kind in ("p2p", "collective"):
            tot = totals[kind]
            if tot:
                fake = CommOp(step, kind, "", "", 0.0, tot["elapse"], tot["transit"],
                              tot["wait"], 0.0, (), {}, "")
                bw = {}
                for tr in TRANSPORTS:
                    size = tot.get(tr, 0.0) + (tot.get("HCCS", 0.0) if tr == "SDMA" else 0.0)
                    t_ms = (tot.get(tr + "_t", 0.0) + (tot.get("HCCS_t", 0.0) if tr == "SDMA"
                                                       else 0.0)) / 1000.0
                    bw[tr] = {"Transit Time(ms)": t_ms, "Transit Size(MB)": size / 1e6,
                              "Size Distribution": {}}
                kinds[kind]["Total Op Info"] = {
                    "Communication Time Info": _time_info(fake, abs_start=False),
                    "Communication Bandwidth Info": bw}
        for (kind, op, g), inst in by_type.items():
            inst.sort(key=lambda x: x[0])
            picks = {"top1": inst[-1][1], "middle": inst[len(inst) // 2][1],
                     "bottom1": inst[0][1]}
            for label, links in picks.items():
                mat[kind][f"{op}-{label}@{g}"] = links
            total: dict[str, Any] = {}
            for _, links in inst:
                for lk, v in links.items():
                    t_ = total.setdefault(lk, {"Transport Type": v["Transport Type"],
                                               "Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0,
                                               "Bandwidth(GB/s)": 0.0})
                    t_["Transit Size(MB)"] += v["Transit Size(MB)"]
                    t_["Transit Time(ms)"] += v["Transit Time(ms)"]
            for t_ in total.values():
                t_["Bandwidth(GB/s)"] = round(t_["Transit Size(MB)"] / t_["Transit Time(ms)"], 4) \
                    if t_["Transit Time(ms)"] else 0
            mat[kind][f"{op}-total@{g}"] = total
        comm_json[key] = kinds
        matrix[key] = mat
    return comm_json, matrix
