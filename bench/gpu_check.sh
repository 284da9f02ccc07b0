#!/usr/bin/env bash
# The OpenCL tests and the bench on a machine with an NVIDIA GPU, through NVIDIA's OpenCL.
#
#   bash bench/gpu_check.sh OUTDIR        # logs and bench/gpu.md-style table land in OUTDIR
#
# Wheels for packages the machine lacks (pyopencl and its pure-Python needs, gguf) may be put
# in .whl/ beforehand; they are installed into a scratch folder, never into the system.
# GPU_CHECK_QUICK=1 shortens every stage (a dry run on a CPU-only machine with pocl);
# GPU_CHECK_{TEST,BENCH,LAUNCH}_S bound the stages in seconds; GPU_CHECK_SHAPES=1 adds the
# matmul tile-shape sweep (bench/gpu_gemm_shapes.py).
set -u
out=${1:-/tmp/gpu_check}
mkdir -p "$out"
quick=${GPU_CHECK_QUICK:-0}

if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu_site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/gpu_site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
export PYTHONUNBUFFERED=1

# NVIDIA's driver ships its OpenCL library; the ICD loader finds it through a vendors file.
# Images often register only pocl, so the driver's library is added beside what is there.
lib=$( (ldconfig -p | awk '/libnvidia-opencl\.so/ {print $NF}';
        timeout 30 find / -name 'libnvidia-opencl.so*' -not -path '/proc/*' 2>/dev/null) \
      | head -1)
if [ -n "$lib" ]; then
    mkdir -p /tmp/gpu_icd && echo "$lib" > /tmp/gpu_icd/nvidia.icd
    cp /etc/OpenCL/vendors/*.icd /tmp/gpu_icd/ 2>/dev/null
    export OCL_ICD_VENDORS=/tmp/gpu_icd
else
    echo "no libnvidia-opencl found; driver folders:"; ls /usr/local/nvidia/lib* 2>&1 | head -30
fi

{
    echo "== machine"; nvidia-smi -L 2>&1; lscpu | grep -E 'Model name|^CPU\(s\)' 2>&1
    echo "OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-}: $(cat ${OCL_ICD_VENDORS:-/etc/OpenCL/vendors}/*.icd)"
    python3 - <<'EOF'
import llvmlite, numpy, pyopencl as cl
print("python", __import__("sys").version.split()[0], "numpy", numpy.__version__,
      "llvmlite", llvmlite.__version__, "pyopencl", cl.VERSION_TEXT)
for p in cl.get_platforms():
    for d in p.get_devices():
        print(" ", p.name, "|", d.name, "|", d.version, "| driver", d.driver_version,
              "| CUs", d.max_compute_units, "| fp64" if "fp64" in d.extensions else "")
import fgrad.lower.opencl.device as dev
print("fgrad picks:", dev.default_index())
EOF
} 2>&1 | tee "$out/machine.txt"
gpu_test='import pyopencl as c; assert any(d.type & c.device_type.GPU
    for p in c.get_platforms() for d in p.get_devices())'
[ "$quick" = 1 ] || python3 -c "$gpu_test" 2>/dev/null || { echo "no OpenCL GPU: stopping"; exit 2; }

only=${GPU_CHECK_ONLY:-W1,W2,W3,W4,W5,W6,W7,W8,W9}
bench_limit=${GPU_CHECK_BENCH_S:-300}
test_limit=${GPU_CHECK_TEST_S:-300}
if [ "$quick" = 1 ]; then only=W1,W7; bench_limit=120; test_limit=120; fi

echo "== tests on the GPU's OpenCL (every test parametrized or marked for opencl)"
workers=$(( $(nproc) > 12 ? 12 : $(nproc) ))
per_test=""
python3 -c "import pytest_timeout" 2>/dev/null && per_test="--timeout 120"
FGRAD_REQUIRE_OPENCL=1 timeout "$test_limit" python3 -m pytest tests -q -k opencl \
    --backends=opencl -n "$workers" -p no:cacheprovider -rfE $per_test \
    > "$out/tests.log" 2>&1
echo "pytest exit $?"
grep -E '^(FAILED|ERROR)' "$out/tests.log" | cut -c1-220 | head -40
tail -3 "$out/tests.log"

echo "== bench (fgrad llvm on the host CPU, fgrad opencl on the GPU, JAX wherever it runs)"
FGRAD_BENCH_BACKENDS=llvm,opencl timeout "$bench_limit" python3 bench/run.py --only "$only" \
    --repeats 3 --markdown "$out/bench.md" 2>&1 | tee "$out/bench.log" | grep -v '^ *$'
python3 -c "import jax; print('jax devices:', jax.devices())" 2>&1 | tail -1 | tee -a "$out/bench.log"

echo "== where the W5 step's time goes on the OpenCL device (fgrad.profiler)"
timeout 120 python3 - <<'EOF2' 2>&1 | tee "$out/profile.txt" | head -45
import sys
sys.path.insert(0, "bench")
import fgrad
from fgrad import Tensor, optim
import mlp
from harness import fgrad_place
params, x, y = mlp.data(256)
opt = optim.Adam(lr=mlp.LR)
model = fgrad_place("opencl", mlp.fgrad_model())
state = fgrad_place("opencl", opt.init(model))
xt, yt = fgrad_place("opencl", [Tensor(x), Tensor(y)])
fgrad.jit(mlp.fgrad_step(opt), backend="opencl").profile(model, state, xt, yt)
EOF2

echo "== where a launch-bound step's time goes (bench/gpu_launch.py)"
[ "$quick" = 1 ] || (cd bench && timeout "${GPU_CHECK_LAUNCH_S:-150}" python3 gpu_launch.py) 2>&1 | tee "$out/launch.md"

[ "${GPU_CHECK_SHAPES:-0}" = 1 ] || exit 0
echo "== the GPU matmul form at a few tile shapes"
timeout 120 python3 bench/gpu_gemm_shapes.py 2>&1 | tee "$out/gemm_shapes.txt"
