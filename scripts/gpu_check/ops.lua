--- The op cases of scripts/gpu-check: for every op of the op table (engine/ops/ops.def, as
-- dle.core.op_table() lists it), a function that reaches it through the public API on inputs made
-- by an input maker I (scripts/gpu_check/inputs.lua) and returns what to compare. Backward ops are
-- reached through autograd (their case returns the gradients). A case may name the dtypes it runs
-- in (default: every dtype for the elementwise-like kinds, the float ones otherwise); a dtype the
-- reference device rejects is skipped. tests/gpu_check_spec.lua checks, with dle.profile, that each
-- case runs the op it is named after, and that every op of the table has one.
local dle = require("dle")
local F = dle.nn.functional

local ALL = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool", "int8", "int16"}
local FLOATS = {"float32", "float64", "float16", "bfloat16"}
local F32_64 = {"float32", "float64"}
-- kinds whose ops are defined on most dtypes: they run in all of them
local ALL_DTYPE_KINDS = {unary = true, binary = true, compare = true, reduce = true, where = true, copy = true,
                         view = true, index = true, arrange = true, sort = true, scan = true, select = true}

local C = {}

-- The gradients of sum(f(...) * w) with respect to each leaf, w a random tensor of the output's
-- shape: what reaches an op's backward ops. Returns the output and the gradients.
local function grads(I, f, ...)
  local leaves = {...}
  local y = f(table.unpack(leaves))
  local w = I.like(y)
  dle.sum(y * w):backward()
  local out = {y:detach()}
  for _, l in ipairs(leaves) do out[#out + 1] = l.grad end
  return out
end

-- ---------------------------------------------------------------- creation and random numbers
C.full = {dtypes = ALL, run = function(I) return dle.full({3, 4}, 2, {dtype = I.dtype, device = I.device}) end}
C.arange = {dtypes = ALL, run = function(I)
  local hi = I.dtype == "bool" and 2 or 9
  return dle.arange(0, hi, 1, {dtype = I.dtype, device = I.device})
end}
C.rand = {run = function(I) return dle.rand({5, 7}, {dtype = I.dtype, device = I.device, generator = I.gen()}) end}
C.randn = {run = function(I) return dle.randn({5, 7}, {dtype = I.dtype, device = I.device, generator = I.gen()}) end}
C.randint = {dtypes = ALL, run = function(I)
  return dle.randint(0, I.dtype == "bool" and 2 or 9, {4, 6}, {dtype = I.dtype, device = I.device, generator = I.gen()})
end}

-- ---------------------------------------------------------------- views and copies
C.view = {run = function(I) return I.x({3, 4}):view(2, 6) end}
C.permute = {run = function(I) return I.x({2, 3, 4}):permute(3, 1, 2):contiguous() end}
C.narrow = {run = function(I) return I.x({5, 4}):narrow(1, 2, 3):contiguous() end}
C.select = {run = function(I) return I.x({5, 4}):select(2, 3):contiguous() end}
C.expand = {run = function(I) return I.x({1, 4}):expand(3, 4):contiguous() end}
C.diagonal = {run = function(I) return I.x({4, 5}):diagonal():contiguous() end}
C.copy = {run = function(I) return I.x({3, 4}):t():clone() end}

-- ---------------------------------------------------------------- elementwise
-- unary ops: x:op(args) on a transposed view, with inputs in the op's domain
local unary_input = {log = "pos", sqrt = "pos", rsqrt = "pos", log2 = "pos", log10 = "pos", log1p = "pos",
                     acosh = "above1", asin = "unit", acos = "unit", atanh = "unit", erfinv = "unit"}
local unary_args = {clamp = {-0.5, 0.7}, pow_scalar = {2}}
local unary_name = {pow_scalar = "pow"}
local UNARY = {"neg", "abs", "sign", "exp", "log", "expm1", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
               "tanh", "sigmoid", "relu", "gelu", "silu", "floor", "ceil", "round", "logical_not", "trunc", "frac",
               "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
               "log2", "log10", "exp2", "isnan", "isinf", "isfinite", "nan_to_num", "pow_scalar", "clamp"}
for _, name in ipairs(UNARY) do
  C[name] = {run = function(I)
    local x = I[unary_input[name] or "x"]({4, 5}):t()
    local f = dle[unary_name[name] or name]
    return f(x, table.unpack(unary_args[name] or {}))
  end}
end
-- gelu's derivative is gelu_backward (first order) and gelu_grad (inside gelu_backward's own gradient)
C.gelu_backward = {dtypes = FLOATS, run = function(I) return grads(I, dle.gelu, I.leaf(I.x({3, 4}))) end}
C.gelu_grad = {dtypes = F32_64, run = function(I)
  local x, w = I.leaf(I.x({3, 4})), I.leaf(I.x({3, 4}))
  local g = dle.grad({dle.sum(dle.gelu(x) * w)}, {x}, {create_graph = true})[1]
  dle.sum(g * I.like(g)):backward()   -- w's gradient is gelu_grad(x) times the weights
  return {g:detach(), x.grad, w.grad}
end}

-- binary ops: a {3, 5} against a broadcast row {5}
local BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "fmod", "remainder",
                "floor_divide", "fmax", "fmin", "hypot", "logaddexp", "copysign", "eq", "ne", "lt", "le", "gt", "ge"}
local nonzero_divisor = {div = true, fmod = true, remainder = true, floor_divide = true}
for _, name in ipairs(BINARY) do
  C[name] = {run = function(I)
    local a = I.x({3, 5})
    local b = nonzero_divisor[name] and I.nonzero({5}) or name == "pow" and I.exponent({5}) or I.x({5})
    return dle[name](a, b)
  end}
end
C.where = {run = function(I) return dle.where(I.mask({3, 4}), I.x({3, 4}), I.x({4})) end}

-- ---------------------------------------------------------------- reductions, softmax, scans, sorts
for _, name in ipairs({"sum", "mean", "prod", "var", "std", "logsumexp", "amax", "amin"}) do
  C[name] = {run = function(I)
    local x = I.x({3, 4, 5})
    return {x[name](x, 2), x[name](x, {1, 3}, true)}
  end}
end
for _, name in ipairs({"max", "min"}) do
  C[name] = {run = function(I)
    local x = I.x({4, 6})
    local v, i = x[name](x, 2)
    return {v, i, x[name](x)}
  end}
end
C.argmax = {run = function(I) local x = I.x({4, 6}) return {x:argmax(2), x:argmax()} end}
C.argmin = {run = function(I) local x = I.x({4, 6}) return {x:argmin(1), x:argmin()} end}
C.softmax = {run = function(I) return grads(I, function(x) return x:softmax(2) end, I.leaf(I.x({3, 7}))) end}
C.log_softmax = {run = function(I) return grads(I, function(x) return x:log_softmax(2) end, I.leaf(I.x({3, 7}))) end}
for _, name in ipairs({"cumsum", "cumprod", "logcumsumexp"}) do
  C[name] = {run = function(I) return dle[name](I.x({3, 6}), 2) end}
end
for _, name in ipairs({"cummax", "cummin"}) do
  C[name] = {run = function(I) return {dle[name](I.x({3, 6}), 2)} end}
end
C.sort = {run = function(I) return {dle.sort(I.distinct({3, 6}), 2)} end}
C.topk = {run = function(I) return {dle.topk(I.distinct({3, 6}), 3, 2)} end}
C.kthvalue = {run = function(I) return {dle.kthvalue(I.distinct({3, 6}), 2, 2)} end}
C.mode = {run = function(I) return {dle.mode(I.small_ints({3, 8}), 2)} end}

-- ---------------------------------------------------------------- products and indexing
C.matmul = {dtypes = {"float32", "float64", "float16", "bfloat16", "int32", "int64"}, run = function(I)
  return {dle.matmul(I.x({5, 7}), I.x({7, 3})), dle.matmul(I.x({2, 3, 4}), I.x({4, 5}):t():t())}
end}
C.cat = {run = function(I) return dle.cat({I.x({2, 4}), I.x({3, 4}):t():t()}, 1) end}
C.gather = {run = function(I) return I.x({4, 5}):gather(2, I.idx({4, 3}, 5)) end}
C.index_select = {run = function(I) return I.x({4, 5}):index_select(2, I.idx({3}, 5)) end}
C.scatter_add = {run = function(I) return I.x({3, 5}):scatter_add(1, I.idx({2, 5}, 3), I.x({2, 5})) end}
C.index_add = {run = function(I) return I.x({3, 5}):index_add(1, I.idx({2}, 3), I.x({2, 5})) end}
C.scatter = {run = function(I) return dle.scatter(I.x({3, 5}), 1, I.perm_idx({2, 5}, 3), I.x({2, 5})) end}
C.scatter_reduce = {run = function(I)
  return dle.scatter_reduce(I.x({3, 5}), 1, I.idx({4, 5}, 3), I.x({4, 5}), "amax")
end}
C.masked_fill = {run = function(I) return I.x({4, 5}):masked_fill(I.mask({5}), 1) end}
C.tril = {run = function(I) return I.x({4, 5}):tril(1) end}
C.triu = {run = function(I) return I.x({4, 5}):triu(-1) end}
C.one_hot = {dtypes = {"int64"}, run = function(I) return dle.one_hot(I.idx({2, 3}, 5):sub(1), 5) end}
C.embedding = {run = function(I)
  return grads(I, function(w) return F.embedding(I.idx({2, 3}, 9), w) end, I.leaf(I.x({9, 4})))
end}
C.embedding_backward = C.embedding
C.nonzero = {run = function(I) return dle.nonzero(I.x({4, 5})) end}
C.masked_select = {run = function(I) return dle.masked_select(I.x({4, 5}), I.mask({4, 5})) end}
C.masked_scatter = {run = function(I) return dle.masked_scatter(I.x({4, 5}), I.mask({4, 5}), I.x({20})) end}
C.unique = {run = function(I) return dle.unique(I.small_ints({12})) end}
C.bincount = {dtypes = {"int64", "int32", "uint8"}, run = function(I)
  return dle.bincount(I.idx({10}, 6):sub(1):to(I.dtype))
end}
C.searchsorted = {run = function(I)
  return dle.searchsorted(dle.sort(I.x({2, 6}), 2), I.x({2, 3}))
end}
C.flip = {run = function(I) return dle.flip(I.x({3, 4}), {1, 2}) end}
C.roll = {run = function(I) return dle.roll(I.x({3, 4}), {1, -2}, {1, 2}) end}
C.pad = {run = function(I) return F.pad(I.x({2, 3, 4}), {1, 2}, {mode = "reflect"}) end}

-- ---------------------------------------------------------------- neural-network ops (float dtypes)
C.conv2d = {run = function(I)
  return grads(I, function(x, w) return F.conv2d(x, w, nil, {stride = 2, padding = 1}) end,
               I.leaf(I.x({2, 3, 7, 6})), I.leaf(I.x({4, 3, 3, 3})))
end}
C.conv2d_grad_input, C.conv2d_grad_weight = C.conv2d, C.conv2d
C.max_pool2d = {run = function(I) return {F.max_pool2d(I.distinct({2, 3, 6, 6}), 2, {return_indices = true})} end}
C.avg_pool2d = {run = function(I)
  return grads(I, function(x) return F.avg_pool2d(x, 3, {stride = 2, padding = 1}) end, I.leaf(I.x({2, 3, 7, 6})))
end}
C.avg_pool2d_grad = C.avg_pool2d
C.layer_norm = {run = function(I)
  return grads(I, function(x, w, b) return F.layer_norm(x, w, b) end,
               I.leaf(I.x({4, 3, 5})), I.leaf(I.x({5})), I.leaf(I.x({5})))
end}
C.layer_norm_grad_input, C.layer_norm_grad_affine = C.layer_norm, C.layer_norm
C.batch_norm = {run = function(I)
  return grads(I, function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end,
               I.leaf(I.x({4, 3, 2, 2})), I.leaf(I.x({3})), I.leaf(I.x({3})))
end}
C.batch_norm_grad_input, C.batch_norm_grad_affine = C.batch_norm, C.batch_norm
C.group_norm = {run = function(I)
  return grads(I, function(x, w, b) return F.group_norm(x, 2, w, b) end,
               I.leaf(I.x({3, 4, 5})), I.leaf(I.x({4})), I.leaf(I.x({4})))
end}
C.group_norm_grad_input, C.group_norm_grad_affine = C.group_norm, C.group_norm
C.dropout = {run = function(I)
  return F.dropout(I.x({6, 7}), 0.3, true, {generator = I.gen()})
end}
C.sdpa = {dtypes = FLOATS, run = function(I)
  return grads(I, function(q, k, v) return (dle.sdpa(q, k, v, {causal = true})) end,
               I.leaf(I.x({2, 2, 5, 3})), I.leaf(I.x({2, 2, 5, 3})), I.leaf(I.x({2, 2, 5, 3})))
end}
C.sdpa_backward = C.sdpa
-- a gradient through the probabilities too takes the unfused path, through sdpa_score_grad
C.sdpa_score_grad = {dtypes = F32_64, run = function(I)
  return grads(I, function(q, k, v)
    local o, p = dle.sdpa(q, k, v)
    return dle.cat({o:flatten(), p:flatten()})
  end, I.leaf(I.x({2, 4, 3})), I.leaf(I.x({2, 5, 3})), I.leaf(I.x({2, 5, 3})))
end}
C.upsample = {run = function(I)
  return grads(I, function(x) return dle.upsample(x, {6, 8}, {mode = "linear"}) end, I.leaf(I.x({1, 2, 3, 4})))
end}
C.upsample_backward = C.upsample
C.lstm_cell_fused = {run = function(I)
  return grads(I, function(xg, hg, c) return (dle.lstm_cell_fused(xg, hg, c)) end,
               I.leaf(I.x({3, 8})), I.leaf(I.x({3, 8})), I.leaf(I.x({3, 2})))
end}
C.lstm_cell_fused_backward = C.lstm_cell_fused
C.gru_cell_fused = {run = function(I)
  return grads(I, function(xg, hg, h) return (dle.gru_cell_fused(xg, hg, h)) end,
               I.leaf(I.x({3, 6})), I.leaf(I.x({3, 6})), I.leaf(I.x({3, 2})))
end}
C.gru_cell_fused_backward = C.gru_cell_fused

-- ---------------------------------------------------------------- losses (float32 and float64)
local function loss_case(f)
  return {dtypes = F32_64, run = function(I) return grads(I, function(x) return f(I, x) end, I.leaf(I.x({5, 7}))) end}
end
C.cross_entropy = loss_case(function(I, x) return F.cross_entropy(x, I.idx({5}, 7), {label_smoothing = 0.1}) end)
C.cross_entropy_backward = C.cross_entropy
C.soft_cross_entropy = loss_case(function(I, x) return F.cross_entropy(x, I.pos({5, 7}):softmax(2)) end)
C.soft_cross_entropy_backward = C.soft_cross_entropy
C.nll_loss = loss_case(function(I, x) return F.nll_loss(x:log_softmax(2), I.idx({5}, 7)) end)
C.nll_loss_backward = C.nll_loss
C.mse_loss = loss_case(function(I, x) return F.mse_loss(x, I.x({5, 7})) end)
C.mse_loss_backward = C.mse_loss
C.binary_cross_entropy_with_logits = loss_case(function(I, x)
  return F.binary_cross_entropy_with_logits(x, I.unit({5, 7}):abs(), {pos_weight = I.pos({7})})
end)
C.binary_cross_entropy_with_logits_backward = C.binary_cross_entropy_with_logits
C.ctc_loss = {dtypes = F32_64, run = function(I)
  return grads(I, function(x)
    return F.ctc_loss(x:log_softmax(3), I.idx({2, 3}, 4):add(1), {8, 7}, {3, 2})
  end, I.leaf(I.x({8, 2, 5})))
end}
C.ctc_loss_backward = C.ctc_loss

-- ---------------------------------------------------------------- linear algebra (float32 and float64)
local function spd(I, n)   -- a well-conditioned symmetric positive-definite matrix
  local a = I.x({n, n})
  return a:matmul(a:t()) + dle.eye(n, {dtype = I.dtype, device = I.device}) * n
end
C.linalg_solve = {dtypes = F32_64, run = function(I) return dle.linalg.solve(spd(I, 4), I.x({4, 2})) end}
C.linalg_inv = {dtypes = F32_64, run = function(I) return dle.linalg.inv(spd(I, 4)) end}
C.linalg_det = {dtypes = F32_64, run = function(I) return dle.linalg.det(spd(I, 4)) end}
C.linalg_slogdet = {dtypes = F32_64, run = function(I) return {dle.linalg.slogdet(spd(I, 4))} end}
C.linalg_cholesky = {dtypes = F32_64, run = function(I) return dle.linalg.cholesky(spd(I, 4)) end}
-- factors are unique up to signs: compare what they reconstruct, and the singular values/eigenvalues
C.linalg_qr = {dtypes = F32_64, run = function(I)
  local q, r = dle.linalg.qr(I.x({5, 3}))
  return {q:matmul(r), r:diagonal():abs()}
end}
C.linalg_svd = {dtypes = F32_64, run = function(I)
  local u, s, vh = dle.linalg.svd(I.x({4, 3}), {full_matrices = false})
  return {(u * s):matmul(vh), s}
end}
C.linalg_eigh = {dtypes = F32_64, run = function(I)
  local w, v = dle.linalg.eigh(spd(I, 4))
  return {w, (v * w):matmul(v:t())}
end}

-- the transforms (complex results compared as their (re, im) pairs): c2c, r2c and c2r
C.fft = {dtypes = F32_64, run = function(I)
  local x = I.x({6, 5})
  return {dle.view_as_real(dle.fft.fft(x, nil, 1)), dle.view_as_real(dle.fft.rfft(x)), dle.fft.irfft(dle.fft.rfft(x), 5)}
end}

--- M.cases: op name -> {dtypes, run}; M.default_dtypes(kind): the dtypes of a case that names none.
local M = {cases = C}
function M.default_dtypes(kind)
  return ALL_DTYPE_KINDS[kind] and ALL or FLOATS
end
return M
