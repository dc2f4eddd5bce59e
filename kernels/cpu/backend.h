/* backend.h — how the CPU backend is assembled: each kernel family file registers its kernels. */
#ifndef DLE_CPU_BACKEND_H
#define DLE_CPU_BACKEND_H

#include "../../engine/dle.h"

void cpu_register_copy(dle_backend *b);        /* copy.c: copy, full, arange */
void cpu_register_elementwise(dle_backend *b); /* elementwise.c */
void cpu_register_random(dle_backend *b);      /* random.c: rand, randn, randint */
void cpu_register_reduce(dle_backend *b);      /* reduce.c: reductions */
void cpu_register_softmax(dle_backend *b);     /* softmax.c: softmax, log_softmax */
void cpu_register_matmul(dle_backend *b);      /* matmul.c */
void cpu_register_index(dle_backend *b);       /* index.c: cat, gather, masked_fill, ... */
void cpu_register_conv(dle_backend *b);        /* conv.c: conv2d and its gradients */
void cpu_register_pool(dle_backend *b);        /* pool.c: max and average pooling */
void cpu_register_norm(dle_backend *b);        /* norm.c: layer_norm, batch_norm */
void cpu_register_nn(dle_backend *b);          /* nn.c: cross-entropy, embedding, dropout */
void cpu_register_losses(dle_backend *b);      /* losses.c: mse, nll, bce-with-logits, soft cross-entropy */
void cpu_register_attention(dle_backend *b);   /* attention.c: sdpa and its score gradient */
void cpu_register_optim(dle_backend *b);       /* optim.c: the fused optimizer steps (b->optim) */
void cpu_register_fused(dle_backend *b);       /* fused.c: the fused elementwise executor */

#endif
