#!/usr/bin/env bash
# Builds benchmarks/data/spaces-cpu.jsonl: the measured knob spaces the replay studies run on (docs/guide/spaces.md).
# Resumable: run it again and every judgement already in the dataset for this machine is skipped. Each group is
# measured whole (both rounds) before the next starts, so an interrupted build leaves complete tasks behind.
#
# The cpu suite's six row kernels and three of the examples are measured whole (8-72 configurations each).
# The kb-cpu tasks' generated seeds have 16 to 1,024 configurations: those of at most 40 are measured whole,
# larger ones at their seed and a seeded uniform sample of 40 (prefix-stable: a later `--sample 300` extends
# it without measuring again). At about 2 s a judgement on a 2-core VM, 300 a task would cost 20 minutes; 40
# costs under 3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-benchmarks/data/spaces-cpu.jsonl}
kiln=${KILN:-.venv/bin/kiln}
"$kiln" measure cpu --tasks gelu,layer_norm,rms_norm,row_mean,softmax,transpose --out "$out"
# Three of the examples, whole (8-72 configurations): row_softmax is `make demo`'s task (their layer_norm is
# another task of the cpu suite's name, which a dataset cannot hold twice).
"$kiln" measure examples --tasks row_softmax,log_softmax,row_sum --out "$out"
groups=(
  44_MSELoss,46_HuberLoss,48_KLDivLoss,26_Frobenius_norm_,10_Sigmoid,31_LayerNorm
  12_GELU_,17_Swish,19_Sum_reduction_over_a_dimension,29_Softmax,32_RMSNorm_
  24_Argmax_over_a_dimension,30_LogSoftmax,33_GroupNorm_,14_ELU,49_CosineSimilarityLoss
  4_Matrix_vector_multiplication_,21_Max_reduction_over_a_dimension,66_Scale_Add_Tanh,70_RMSNorm_SiLU,8_ReLU
  27_L2Norm_,34_InstanceNorm,15_Softplus,68_Softmax_Mul_Sum
)
for group in "${groups[@]}"; do
  "$kiln" measure kb-cpu --tasks "$group" --whole-up-to 40 --sample 40 --out "$out"
done
# Products, an attention block and a convolution (2026-12-06, late): the generated GEMM seeds have 4,800
# configurations (MR, NR, MC, KC, NC, FLAGS), the attention and convolution seeds about a million; each at its
# seed and a sample of 40. The cpu suite's matmul, matmul_bias_gelu and attention have no hand-written seed.
"$kiln" measure cpu --tasks matmul,matmul_bias_gelu,attention --whole-up-to 40 --sample 40 --out "$out"
"$kiln" measure kb-cpu --tasks 1_Square_matrix_multiplication_,3_Batched_matrix_multiplication,7_conv_standard_2D_square_input_square_kernel \
  --whole-up-to 40 --sample 40 --out "$out"
# The row kernels, GELU and the transpose at other widths (2026-12-07; benchmarks/tasks/widths/README.md): the
# suites' hand-written seeds at one new size each, measured whole (8-72 configurations; 1,232 judgements).
"$kiln" measure benchmarks/tasks/widths --out "$out"
