"""The serverless back end: ModelFn seam, runtimes, scheduler, executors, data plane."""

import os

# MKL's float32 GEMMs may round by their operands' memory alignment unless its conditional numerical
# reproducibility is strict: on an AVX-512 CPU the same prompt gave images 3 values apart between an executor
# process and the server's own ModelFns (weights held at other addresses). AUTO keeps the CPU's fastest code
# path, STRICT makes its results independent of alignment, so every executor and `--executors 0` give the same
# bits. Every process that runs ModelFns imports this package before its first GEMM; a value the user set wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
