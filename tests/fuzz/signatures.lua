--- signatures.lua — the argument shapes of dle's ops, for the fuzzer's "typed" targets: the
-- fuzzer builds arguments that fit (so calls reach the kernels), then breaks one or two of them
-- (a dim off by one, a wrong dtype, an index out of range, a non-contiguous or closed tensor).
--
-- A signature is a space-separated list of arguments:
--   T[N,C]     a float tensor of that shape; the letters are sizes drawn once per call (1..5,
--              sometimes 0), so every T[N,...] of one call agrees on N
--   I[N]:C     an int64 tensor of indices 1..C (sometimes 0, negative or C+1)
--   B[N,C]     a bool tensor
--   L[N,C]     a list of 1..3 tensors of that shape
--   s[H,W]     a table of sizes
--   n, n:C     a small integer, the size C          d   a dim of the first tensor (1-based, +-)
--   x          a float                              b   a boolean
--   e          an einsum equation                   O{k1,k2}  options with those keys
-- A trailing ? makes an argument optional (left out, or nil when others follow).
return {
  -- matrix products
  matmul = {"T[N,M] T[M,P]", "T[B,N,M] T[M,P]", "T[M] T[B,M,P]", "T[B,N,M] T[B,M,P] O{out}"},
  mm = {"T[N,M] T[M,P] O{out}"},
  bmm = {"T[B,N,M] T[B,M,P] O{out}"},
  mv = {"T[N,M] T[M]"},
  dot = {"T[M] T[M]"},
  outer = {"T[N] T[M]"},
  ger = {"T[N] T[M]"},
  addmm = {"T[N,P] T[N,M] T[M,P]", "T[P] T[N,M] T[M,P]"},
  einsum = {"e T[N,M] T[M,P]", "e T[B,N,M] T[B,M,P]", "e T[N,N]"},
  -- convolution and pooling
  conv2d = {"T[N,C,H,W] T[O,C,K,K] T[O]? O{stride,padding,dilation,groups}"},
  max_pool2d = {"T[N,C,H,W] n O{stride,padding}"},
  avg_pool2d = {"T[N,C,H,W] n O{stride,padding,count_include_pad}"},
  conv2d_grad_input = {"T[N,O,H,W] T[O,C,K,K] s[H,W] O{stride,padding,dilation,groups}"},
  conv2d_grad_weight = {"T[N,O,H,W] T[N,C,H,W] s[K,K] O{stride,padding,dilation,groups}"},
  avg_pool2d_grad = {"T[N,C,H,W] s[H,W] n O{stride,padding,count_include_pad}"},
  -- normalization
  layer_norm = {"T[N,C] n:C T[C]? T[C]? x?", "T[N,H,C] s[H,C] T[H,C]? T[H,C]? x?"},
  layer_norm_grad_input = {"T[N,C] T[N,C] T[N,2] T[C]? n:C x?"},
  layer_norm_grad_affine = {"T[N,C] T[N,C] T[N,2] n:C x?"},
  batch_norm = {"T[N,C,H] T[C]? T[C]? T[C]? T[C]? b x?", "T[N,C] T[C]? T[C]? T[C]? T[C]? b x?"},
  batch_norm_grad_input = {"T[N,C,H] T[N,C,H] T[C,2] T[C]? x?"},
  batch_norm_grad_affine = {"T[N,C,H] T[N,C,H] T[C,2] x?"},
  -- losses and nn ops
  cross_entropy = {"T[N,C] I[N]:C O{reduction,ignore_index,label_smoothing,weight}"},
  cross_entropy_backward = {"T[] T[N,C] I[N]:C T[N] O{reduction,ignore_index,label_smoothing}",
                            "T[N] T[N,C] I[N]:C T[N] O{reduction}"},
  nll_loss = {"T[N,C] I[N]:C O{reduction,ignore_index,label_smoothing}"},
  nll_loss_backward = {"T[] I[N]:C n:C O{reduction,ignore_index,label_smoothing}"},
  mse_loss = {"T[N,C] T[N,C] O{reduction}"},
  mse_loss_backward = {"T[] T[N,C] T[N,C] O{reduction}"},
  binary_cross_entropy_with_logits = {"T[N,C] T[N,C] O{reduction,pos_weight}"},
  binary_cross_entropy_with_logits_backward = {"T[] T[N,C] T[N,C] O{reduction,pos_weight}"},
  soft_cross_entropy = {"T[N,C] T[N,C] O{reduction,label_smoothing}"},
  soft_cross_entropy_backward = {"T[] T[N,C] T[N,C] T[N] O{reduction,label_smoothing}"},
  embedding = {"T[V,E] I[N,S]:V O{padding_idx}"},
  embedding_backward = {"T[N,S,E] I[N,S]:V n:V O{padding_idx}"},
  dropout = {"T[N,C] x O{generator}"},
  sdpa = {"T[B,S,E] T[B,P,E] T[B,P,E] O{mask,causal,scale}", "T[3,B,S,E] O{causal,scale}"},
  sdpa_score_grad = {"T[B,S,E] T[B,P,E] T[B,S,P] x"},
  sdpa_backward = {"T[B,S,E] T[B,S,E] T[B,P,E] T[B,P,E] T[B,S,P] x"},
  gelu_backward = {"T[N,C] T[N,C]"},
  gelu_grad = {"T[N,C]"},
  -- indexing and joining
  gather = {"T[N,C] d I[N,C]:C"},
  scatter_add = {"T[N,C] d I[N,C]:C T[N,C]"},
  scatter_add_ = {"T[N,C] d I[N,C]:C T[N,C]"},
  index_select = {"T[N,C] d I[M]:N"},
  index_add = {"T[N,C] d I[M]:N T[M,C]"},
  index_add_ = {"T[N,C] d I[M]:N T[M,C]"},
  masked_fill = {"T[N,C] B[N,C] x", "T[N,C] B[C] x"},
  masked_fill_ = {"T[N,C] B[N,C] x"},
  where = {"B[N,C] T[N,C] T[N,C]", "B[N,C] x T[C]"},
  cat = {"L[N,C] d"}, concat = {"L[N,C] d"}, stack = {"L[N,C] d"},
  split = {"T[N,C] n d"}, chunk = {"T[N,C] n d"},
  tril = {"T[N,C] n"}, triu = {"T[N,C] n"}, tril_ = {"T[N,C] n"}, triu_ = {"T[N,C] n"},
  one_hot = {"I[N]:C n:C"},
  -- elementwise with extra arguments
  clamp = {"T[N,C] x x"}, clamp_ = {"T[N,C] x x"}, pow = {"T[N,C] x"}, pow_ = {"T[N,C] x"},
  maximum = {"T[N,C] T[N,C]"}, minimum = {"T[N,C] T[N,C]"},
  copy_ = {"T[N,C] T[N,C]", "T[N,C] T[C]"},
  add_ = {"T[N,C] T[N,C]"}, mul_ = {"T[N,C] T[C]"},
  -- reductions
  sum = {"T[N,C,H] d b"}, mean = {"T[N,C,H] d b"}, var = {"T[N,C,H] d b"}, std = {"T[N,C,H] d b"},
  prod = {"T[N,C,H] d b"}, logsumexp = {"T[N,C,H] d b"}, amax = {"T[N,C,H] d b"},
  amin = {"T[N,C,H] d b"}, argmax = {"T[N,C,H] d b"}, argmin = {"T[N,C,H] d b"},
  max = {"T[N,C,H] d b", "T[N,C] T[N,C]"}, min = {"T[N,C,H] d b"}, softmax = {"T[N,C,H] d"},
  log_softmax = {"T[N,C,H] d"}, all = {"B[N,C] d b"}, any = {"B[N,C] d b"},
  norm = {"T[N,C] x d b"},
  -- views
  narrow = {"T[N,C] d n n"}, select = {"T[N,C] d n"}, transpose = {"T[N,C,H] d d"},
  permute = {"T[N,C,H] d d d"}, squeeze = {"T[N,C] d"}, unsqueeze = {"T[N,C] d"},
  flatten = {"T[N,C,H] d d"}, view = {"T[N,C] s[C,N]", "T[N,C] n n"},
  reshape = {"T[N,C] s[C,N]"}, expand = {"T[N,C] s[M,N,C]"},
  -- creation and randomness
  zeros = {"s[N,C] O{dtype,requires_grad}"}, full = {"s[N,C] x O{dtype}"},
  arange = {"x x x O{dtype}"}, linspace = {"x x n O{dtype}"}, eye = {"n n? O{dtype}"},
  rand = {"s[N,C] O{dtype,generator}"}, randn = {"s[N,C] O{dtype,generator}"},
  randint = {"n n s[N,C] O{dtype,generator}"}, randperm = {"n O{generator,dtype}"},
  bernoulli = {"T[N,C] x? O{generator}"}, uniform_ = {"T[N,C] x x O{generator}"},
  normal_ = {"T[N,C] x x O{generator}"}, random_ = {"T[N,C] n n O{generator}"},
  bernoulli_ = {"T[N,C] x O{generator}"},
  -- dle.core helpers behind the Lua classes (reachable from Lua, so they must not crash either)
  sgd_step = {"T[N,C] T[N,C] O{lr,momentum,dampening,weight_decay,nesterov,first,momentum_buffer}"},
  adagrad_step = {"T[N,C] T[N,C] T[N,C] O{lr,step,lr_decay,weight_decay,eps}"},
  rmsprop_step = {"T[N,C] T[N,C] T[N,C] O{lr,alpha,eps,weight_decay,momentum,centered,momentum_buffer,grad_avg}"},
  adam_step = {"T[N,C] T[N,C] T[N,C] T[N,C] O{lr,step,beta1,beta2,eps,weight_decay,amsgrad,max_exp_avg_sq}"},
  adamw_step = {"T[N,C] T[N,C] T[N,C] T[N,C] O{lr,step,beta1,beta2,eps,weight_decay,amsgrad,max_exp_avg_sq}"},
  set_tangent = {"T[N,C] T[N,C]"}, tangent = {"T[N,C]"},
  _philox = {"n n n?"},
}
