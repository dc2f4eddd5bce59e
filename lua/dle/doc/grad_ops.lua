-- Documentation only (dle.help and LDoc read it; see lua/dle/help.lua).

--- The backward ops of the fused ops: internal building blocks, not everyday API.
-- Each computes the gradient of one fused op (nn.ops, or gelu) from the output gradient and what
-- the forward saved; the gradient rules (engine/ops/*_grad.c) call the same ops, and they are
-- tensor methods of the output gradient `gy` so that every op of the op table is reachable from
-- Lua (tests/ops_table_spec.lua). They are differentiable themselves (double backward). To get
-- gradients, call `backward()` or `dle.grad` instead; these are for tests and custom
-- `dle.autograd.Function`s that reuse a fused backward. Options tables are those of the forward
-- op (`reduction`, `ignore_index`, `label_smoothing`, `padding_idx`, the conv geometry).
-- @module nn.grad_ops

--- Building block of conv2d's backward: the gradient of its input x from gy and the weight.
-- {H, W} is the input's spatial size (an integer or `{H, W}`); opts is the forward's
-- `{stride, padding, dilation, groups}`. Also `dle.core._conv2d_grad_input(gy, w, hw, opts)`.
-- @function Tensor:conv2d_grad_input
-- @param w the forward's weight {Cout, Cin/groups, kh, kw}
-- @param hw input size `{H, W}`
-- @param[opt] opts `{stride, padding, dilation, groups}`
-- @treturn dle.Tensor gradient of x {N, Cin, H, W}

--- Building block of conv2d's backward: the gradient of its weight from gy and the input x.
-- k is the kernel size `{kh, kw}`; opts is the forward's. Also `dle.core._conv2d_grad_weight`.
-- @function Tensor:conv2d_grad_weight
-- @param x the forward's input {N, Cin, H, W}
-- @param k kernel size `{kh, kw}`
-- @param[opt] opts `{stride, padding, dilation, groups}`
-- @treturn dle.Tensor gradient of the weight {Cout, Cin/groups, kh, kw}

--- Building block of avg_pool2d's backward: spreads gy over the input of size {H, W}.
-- k and opts are the forward's window and `{stride, padding, count_include_pad}`. Also
-- `dle.core._avg_pool2d_grad(gy, hw, k, opts)`.
-- @function Tensor:avg_pool2d_grad
-- @param hw input size `{H, W}`
-- @param k window size
-- @param[opt] opts `{stride, padding, count_include_pad}`
-- @treturn dle.Tensor gradient of the input {N, C, H, W}

--- Building block of layer_norm's backward: the gradient of x from gy, x and the forward's stats.
-- @function Tensor:layer_norm_grad_input
-- @param x the forward's input
-- @param stats the forward's second result {rows, 2}
-- @param weight the forward's weight, or nil
-- @param normalized_shape as given to the forward
-- @param[opt] eps as given to the forward (default 1e-5)
-- @treturn dle.Tensor gradient of x

--- Building block of layer_norm's backward: the gradients of its weight and bias.
-- @function Tensor:layer_norm_grad_affine
-- @param x the forward's input
-- @param stats the forward's second result
-- @param normalized_shape as given to the forward
-- @param[opt] eps default 1e-5
-- @return gradient of the weight, gradient of the bias

--- Building block of batch_norm's backward (batch statistics): the gradient of x.
-- @function Tensor:batch_norm_grad_input
-- @param x the forward's input {N, C, ...}
-- @param stats the forward's second result {C, 2}
-- @param weight the forward's weight, or nil
-- @param[opt] eps default 1e-5
-- @treturn dle.Tensor gradient of x

--- Building block of batch_norm's backward: the gradients of its weight and bias {C}.
-- @function Tensor:batch_norm_grad_affine
-- @param x the forward's input
-- @param stats the forward's second result
-- @param[opt] eps default 1e-5
-- @return gradient of the weight, gradient of the bias

--- Building block of cross_entropy's backward: the gradient of the logits.
-- (softmax - smoothed one-hot) * gy, divided by the count of targets not ignored for the mean.
-- gy has the loss's shape; lse is the forward's second result.
-- @function Tensor:cross_entropy_backward
-- @param logits {N, C}
-- @param targets int64 {N}
-- @param lse {N}
-- @param[opt] opts the forward's `{reduction, ignore_index, label_smoothing}`
-- @treturn dle.Tensor gradient of the logits {N, C}

--- Building block of soft_cross_entropy's backward: gy (softmax(x) sum_c q - q) (/ N for the mean).
-- @function Tensor:soft_cross_entropy_backward
-- @param logits {N, C}
-- @param targets float {N, C}
-- @param lse {N}
-- @param[opt] opts the forward's `{reduction, label_smoothing}`
-- @treturn dle.Tensor gradient of the logits {N, C}

--- Building block of nll_loss's backward: minus the smoothed one-hot of the targets times gy.
-- Divided by the count of targets not ignored for the mean; C is the number of classes.
-- @function Tensor:nll_loss_backward
-- @param targets int64 {N}
-- @param C number of classes
-- @param[opt] opts the forward's `{reduction, ignore_index, label_smoothing}`
-- @treturn dle.Tensor gradient of logp {N, C}

--- Building block of mse_loss's backward: 2 (input - target) gy (/ numel for the mean).
-- @function Tensor:mse_loss_backward
-- @param input
-- @param target
-- @param[opt] opts `{reduction}`
-- @treturn dle.Tensor gradient of the input

--- Building block of binary_cross_entropy_with_logits's backward: the gradient of the logits x.
-- gy ((1 - y) - (1 + (w - 1) y) sigmoid(-x)) (/ numel for the mean), w the pos_weight.
-- @function Tensor:binary_cross_entropy_with_logits_backward
-- @param x logits
-- @param y targets
-- @param[opt] opts `{reduction, pos_weight}`
-- @treturn dle.Tensor gradient of x

--- Building block of embedding's backward: gy's rows added at their indices into {V, D} zeros.
-- The row `padding_idx` is skipped.
-- @function Tensor:embedding_backward
-- @param indices int64, the forward's
-- @param V number of rows of the weight
-- @param[opt] opts `{padding_idx}`
-- @treturn dle.Tensor gradient of the weight {V, D}

--- Building block of sdpa's backward: the gradient of the scaled scores q k^T {..., L, S}.
-- scale * probs * (gout v^T - rowsum(probs * gout v^T)), from the output gradient gout.
-- @function Tensor:sdpa_score_grad
-- @param v the forward's v
-- @param probs the forward's second result
-- @param scale the forward's scale
-- @treturn dle.Tensor {..., L, S}

--- Building block of sdpa's backward: the gradients of q, k and v in one fused pass.
-- Each is laid out like its input (head-split views of one projection get gradients whose heads
-- merge without a copy); the mask gets no gradient.
-- @function Tensor:sdpa_backward
-- @param q
-- @param k
-- @param v
-- @param probs the forward's second result
-- @param scale the forward's scale
-- @return dq, dk, dv

--- Returns gelu'(x) elementwise: the derivative of the exact GELU (a gradient building block).
-- Also `t:gelu_grad()`; in place: `t:gelu_grad_()`. Integer inputs give float32.
-- @function dle.gelu_grad
-- @tparam dle.Tensor x
-- @treturn dle.Tensor

--- In-place gelu_grad: writes gelu'(x) into x and returns x.
-- @function Tensor:gelu_grad_
-- @treturn dle.Tensor x

--- Returns g * gelu'(x) elementwise in one pass: GELU's backward as one fused op.
-- x and g broadcast; also `x:gelu_backward(g)`; in place: `x:gelu_backward_(g)`.
-- @function dle.gelu_backward
-- @tparam dle.Tensor x the forward's input
-- @tparam dle.Tensor g the gradient of gelu(x)
-- @treturn dle.Tensor the gradient of x

--- In-place gelu_backward: writes g * gelu'(x) into x and returns x.
-- @function Tensor:gelu_backward_
-- @param g the gradient of gelu(x)
-- @treturn dle.Tensor x

--- Building block of group_norm's backward: the gradient of x from gy, x and the forward's stats.
-- @function Tensor:group_norm_grad_input
-- @param x the forward's input {N, C, ...}
-- @param stats the forward's second result {N * num_groups, 2}
-- @param weight the forward's weight, or nil
-- @param num_groups as given to the forward
-- @param[opt] eps default 1e-5
-- @treturn dle.Tensor gradient of x

--- Building block of group_norm's backward: the gradients of its weight and bias {C}.
-- @function Tensor:group_norm_grad_affine
-- @param x the forward's input
-- @param stats the forward's second result
-- @param num_groups as given to the forward
-- @param[opt] eps default 1e-5
-- @return gradient of the weight, gradient of the bias
