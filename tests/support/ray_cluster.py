"""A local Ray cluster (head and workers) for the slow tests and the scale-out bench."""
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path


class LocalCluster:
    """A Ray head with no CPUs (so nothing runs on it) and worker nodes with one CPU and one
    `gpu_slot` each, all on 127.0.0.1; the backend connects to it through RAY_ADDRESS."""

    def __init__(self, scratch: Path):
        from ray.cluster_utils import Cluster

        self.scratch = scratch
        self.temp = tempfile.mkdtemp(prefix="rlray-")  # Ray's sockets: a short path
        # the head still records its address in the default folder (/tmp/ray/ray_current_cluster),
        # which only a cluster started with the default temp_dir creates: missing on a fresh machine
        from ray._common.utils import get_default_ray_temp_dir
        os.makedirs(get_default_ray_temp_dir(), exist_ok=True)
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": 80 << 20, "temp_dir": self.temp})
        self.nodes = []

    def add(self, resources: dict | None = None):
        """A worker node with one CPU and `resources` (default: one gpu_slot)."""
        node = self.cluster.add_node(num_cpus=1, resources={"gpu_slot": 1} if resources is None else resources,
                                     object_store_memory=80 << 20)
        self.nodes.append(node)
        return node

    def node_running(self, mark: str, seen: set[Path]):
        """(node, attempt folder) of a new attempt whose code holds `mark`, if one is running now."""
        for code in self.scratch.glob(f"researchloop-ray/*/attempt-*/*/{'experiment.py'}"):
            folder = code.parent.parent
            if folder in seen:
                continue
            try:
                if mark not in code.read_text():
                    continue
            except OSError:
                continue
            seen.add(folder)
            prefix = folder.parent.name
            for node in self.cluster.worker_nodes:
                if node.node_id.startswith(prefix):
                    return node, folder
        return None

    def kill_when_running(self, mark: str, timeout: float = 120, delay: float = 0.5) -> threading.Thread:
        """Remove the node of the first attempt holding `mark` `delay` s after it started (in a thread)."""
        self.killed: list = []

        def watch():
            seen: set[Path] = set()
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                hit = self.node_running(mark, seen)
                if hit:
                    time.sleep(delay)
                    self.cluster.remove_node(hit[0], allow_graceful=False)
                    self.killed.append(hit)
                    return
                time.sleep(0.05)

        t = threading.Thread(target=watch, daemon=True)
        t.start()
        return t

    def nodes_alive(self) -> list:
        return list(self.cluster.worker_nodes)

    def attempts_with(self, mark: str) -> list[Path]:
        return [p.parent.parent for p in self.scratch.glob("researchloop-ray/*/attempt-*/*/experiment.py")
                if mark in p.read_text(errors="replace")]

    def shutdown(self):
        import ray

        ray.shutdown()
        self.cluster.shutdown()
        shutil.rmtree(self.temp, ignore_errors=True)
