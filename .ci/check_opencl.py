"""Exit 0 when some OpenCL device builds and runs a kernel (CI needs one for the opencl tests).

pip's pyopencl[pocl] bundles pocl 3.0 with LLVM 14, which cannot compile for CPUs newer than
LLVM 14 knows (e.g. AMD Zen 5: "unknown target CPU"); .ci/run then installs Debian's pocl.
"""
import sys

import numpy as np
import pyopencl as cl

SOURCE = "__kernel void inc(__global float *a) { a[get_global_id(0)] += 1.0f; }"


def works(device: "cl.Device") -> bool:
    try:
        ctx = cl.Context([device])
        queue = cl.CommandQueue(ctx)
        host = np.zeros(4, np.float32)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
        cl.Program(ctx, SOURCE).build().inc(queue, (4,), None, buf)
        cl.enqueue_copy(queue, host, buf)
        return bool((host == 1).all())
    except Exception as err:  # a driver that cannot build is what we are looking for
        print(f"  {device.name}: {str(err).splitlines()[0][:100]}")
        return False


def main() -> int:
    ok = []
    for platform in cl.get_platforms():
        for device in platform.get_devices():
            if works(device):
                ok.append(f"{device.name} ({platform.version})")
    print("working OpenCL devices:", ok or "none")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
