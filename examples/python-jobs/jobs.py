#!/usr/bin/env python3
"""Python jobs served to Spindle with its Python kit (sdk/python/spindle_job.py): one sets
an arg at create time that a later node uses, one reads job data an earlier job set, and
one runs until stopped, reporting its status line."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

import spindle_job  # noqa: E402


@spindle_job.job_class
class LookupPrimary(spindle_job.Job):
    """Spin Cycle's interface as a class: create sets `primary` for the nodes after it."""

    type = "py-lookup-primary"
    required = ["cluster"]

    def create(self, args):
        if not isinstance(args.get("cluster"), str):
            raise ValueError("cluster job arg is not set")
        args["primary"] = args["cluster"] + "-db1"
        self.args = {"cluster": args["cluster"], "primary": args["primary"]}

    def run(self, data):
        data["lease"] = "lease-%s-%s" % (self.args["cluster"], self.job_id["request_id"])
        print("primary of %s is %s" % (self.args["cluster"], self.args["primary"]))
        return spindle_job.Return()


@spindle_job.job("py-use-lease", required=["primary"])
def use_lease(ctx):
    lease = ctx.data.get("lease")
    if lease is None:
        return spindle_job.Return(spindle_job.FAIL, 1, "lease job data is not set")
    print("promoting %s with %s" % (ctx.args["primary"], lease))


@spindle_job.job("py-wait-until-stopped", optional=["seconds"])
def wait_until_stopped(ctx):
    seconds = int(ctx.args.get("seconds") or 0)
    started = time.monotonic()
    while True:
        waited = time.monotonic() - started
        ctx.set_status("waited %ds" % int(waited))
        if seconds and waited >= seconds:
            return None
        if ctx.stopping.wait(0.1):
            return spindle_job.Return(spindle_job.STOPPED, 0, "stopped after %ds" % round(waited))


if __name__ == "__main__":
    spindle_job.serve()
