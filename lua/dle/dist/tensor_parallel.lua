--- dle.dist.tensor_parallel: Megatron-LM's split of a Linear layer across the ranks of a group.
--
--   local tp = dle.dist.tensor_parallel
--   local up = tp.ColumnLinear(512, 2048, {gather_output = false, generator = dle.Generator(1)})
--   local down = tp.RowLinear(2048, 512, {input_is_parallel = true, generator = dle.Generator(2)})
--   local y = down(F.gelu(up(x)))    -- one all-reduce forward (in down), one backward (in up)
--
-- ColumnLinear(in, out) keeps rows [r * out / n, (r + 1) * out / n) of the {out, in} weight (and
-- of the bias) on rank r of n; its input is whole on every rank, and its backward sums the input's
-- gradient over the ranks. With gather_output (the default, as Megatron's) the ranks' output
-- columns are gathered into the whole output; without, each rank keeps its own columns, the input a
-- RowLinear with input_is_parallel expects. RowLinear(in, out) keeps columns [r * in / n,
-- (r + 1) * in / n) of the weight; it multiplies its share of the input's features and sums the
-- products over the ranks (an all-reduce); its bias is whole and added once, after the sum. Without
-- input_is_parallel (the default) it takes the whole input and uses its own features of it.
--
-- Initialization: both draw the whole {out, in} weight and the bias as nn.Linear(in, out, opts)
-- does and keep their share, so with the same generator on every rank the split layers compute
-- exactly what one nn.Linear made with that generator would; layer:load_dense(linear) copies the
-- shares of an existing nn.Linear.
local dle = require("dle")
local check = require("dle.check")

local nn = dle.nn
local dist = dle.dist

local M = {}

-- ---------------------------------------------------------------- the four region functions

local function all_reduced(t, group)
  local r = t:detach():clone()
  dle.no_grad(function() dist.all_reduce(r, "sum", {group = group}) end)
  return r
end

-- the whole last dim, made of every rank's part of it (in rank order)
local function gathered(t, group)
  local parts = {}
  for i = 1, dist.world_size(group) do parts[i] = dle.empty(t:shape(), {dtype = t:dtype()}) end
  dle.no_grad(function() dist.all_gather(parts, t:detach():contiguous(), {group = group}) end)
  return dle.cat(parts, -1)
end

-- this rank's part of the last dim
local function own_part(t, group)
  local n = dist.world_size(group)
  local w = t:size(-1) // n
  return t:narrow(-1, dist.rank(group) * w + 1, w):contiguous()
end

-- identity forward, gradients summed over the ranks backward (Megatron's copy_to_region)
local CopyToRegion = dle.autograd.Function {
  name = "tp_copy_to_region",
  forward = function(ctx, x, group) ctx.group = group; return x:clone() end,
  backward = function(ctx, g) return all_reduced(g, ctx.group) end,
}
-- summed over the ranks forward, identity backward (reduce_from_region)
local ReduceFromRegion = dle.autograd.Function {
  name = "tp_reduce_from_region",
  forward = function(_, x, group) return all_reduced(x, group) end,
  backward = function(_, g) return g end,
}
-- every rank's part of the last dim gathered forward, this rank's part of the gradient backward
local GatherFromRegion = dle.autograd.Function {
  name = "tp_gather_from_region",
  forward = function(ctx, x, group) ctx.group = group; return gathered(x, group) end,
  backward = function(ctx, g) return own_part(g, ctx.group) end,
}
-- this rank's part of the last dim forward, the gradient gathered backward (scatter_to_region)
local ScatterToRegion = dle.autograd.Function {
  name = "tp_scatter_to_region",
  forward = function(ctx, x, group) ctx.group = group; return own_part(x, group) end,
  backward = function(ctx, g) return gathered(g, ctx.group) end,
}

-- ---------------------------------------------------------------- the layers

local OPTS = {"bias", "dtype", "generator", "group"}

-- The rank's share [lo, lo + n) of `size` split over the group, or an error naming cls.
local function share(cls, size, what, group)
  local n = dist.world_size(group)
  if size % n ~= 0 then
    check.error(string.format("%s: %s (%d) must be a multiple of the %d ranks", cls, what, size, n))
  end
  return dist.rank(group) * (size // n), size // n
end

-- Sets self's shared weight and bias from a whole {out, in} weight and bias (dim 1: rows, for
-- ColumnLinear; dim 2: columns, for RowLinear, whose bias stays whole).
local function take_shares(self, weight, bias, dim)
  local lo, n = self._lo, self._n
  dle.no_grad(function()
    self.weight = weight:detach():narrow(dim, lo + 1, n):contiguous():requires_grad_(true)
    if bias then
      local b = dim == 1 and bias:detach():narrow(1, lo + 1, n) or bias:detach()
      self.bias = b:contiguous():requires_grad_(true)
    end
  end)
end

-- the whole layer as nn.Linear(in, out, opts) would draw it
local function dense_init(in_f, out_f, opts)
  local lin = nn.Linear(in_f, out_f, {bias = opts.bias, dtype = opts.dtype, generator = opts.generator})
  return lin.weight, lin.bias
end

-- What ColumnLinear's and RowLinear's constructors share: the options (OPTS and the class's own
-- flag), the sizes, and the share of the whole layer's weight along dim (1: rows, 2: columns).
local function split_init(self, cls, flag, in_features, out_features, opts, dim)
  opts = check.options(opts, cls, {flag, table.unpack(OPTS)})
  check.integer(in_features, cls, "in_features")
  check.integer(out_features, cls, "out_features")
  self.in_features, self.out_features, self.group = in_features, out_features, opts.group
  local size, what = out_features, "out_features"
  if dim == 2 then size, what = in_features, "in_features" end
  self._lo, self._n = share(cls, size, what, opts.group)
  self._dim = dim
  local w, b = dense_init(in_features, out_features, opts)
  take_shares(self, w, b, dim)
  return opts
end

-- A split linear layer's input check: x must end in `want` features (`note` says whose).
local function check_features(cls, x, want, note)
  if not dle.is_tensor(x) or x:dim() < 1 or x:size(-1) ~= want then
    check.error(string.format("%s: input must have %d features%s, got shape %s", cls, want, note,
                              dle.is_tensor(x) and check.shape_str(x) or type(x)))
  end
end

-- What ColumnLinear and RowLinear share beyond their constructors.
local SplitLinear = nn.Module:extend("SplitLinear")

--- layer:load_dense(linear): this rank's share of an nn.Linear(in, out)'s weight (ColumnLinear:
-- its rows, and of the bias; RowLinear: its columns, and the whole bias).
function SplitLinear:load_dense(linear)
  take_shares(self, linear.weight, linear.bias, self._dim)
  return self
end

local ColumnLinear = SplitLinear:extend("ColumnLinear")

--- tensor_parallel.ColumnLinear(in_features, out_features, {bias = true, gather_output = true,
-- group, dtype, generator}): the output rows of the weight split over the ranks (see above).
function ColumnLinear:init(in_features, out_features, opts)
  opts = split_init(self, "ColumnLinear", "gather_output", in_features, out_features, opts, 1)
  self.gather_output = opts.gather_output ~= false
end

function ColumnLinear:forward(x)
  check_features("ColumnLinear", x, self.in_features, "")
  local y = nn.functional.linear(CopyToRegion(x, self.group), self.weight, self.bias)
  if self.gather_output then y = GatherFromRegion(y, self.group) end
  return y
end

local RowLinear = SplitLinear:extend("RowLinear")

--- tensor_parallel.RowLinear(in_features, out_features, {bias = true, input_is_parallel = false,
-- group, dtype, generator}): the input columns of the weight split over the ranks (see above).
function RowLinear:init(in_features, out_features, opts)
  opts = split_init(self, "RowLinear", "input_is_parallel", in_features, out_features, opts, 2)
  self.input_is_parallel = opts.input_is_parallel == true
end

function RowLinear:forward(x)
  check_features("RowLinear", x, self.input_is_parallel and self._n or self.in_features,
                 self.input_is_parallel and " (this rank's share)" or "")
  if not self.input_is_parallel then x = ScatterToRegion(x, self.group) end
  local y = ReduceFromRegion(nn.functional.linear(x, self.weight), self.group)
  if self.bias then y = y + self.bias end
  return y
end

-- ---------------------------------------------------------------- attention and the transformer block

local Attention = nn.Module:extend("Attention")

--- tensor_parallel.Attention(d, heads, {causal = false, bias = true, group, dtype, generator}):
-- nn.MultiheadAttention (self-attention) with its heads split over the ranks: rank r keeps the q, k
-- and v rows of heads [r * heads / n, (r + 1) * heads / n) (a ColumnLinear by heads) and the
-- matching input columns of the output projection (a RowLinear); one all-reduce forward (after
-- the projection) and one backward (the input's gradient). Drawn as nn.MultiheadAttention with the
-- same options would be, or taken from one with load_dense(mha).
function Attention:init(d, heads, opts)
  opts = check.options(opts, "Attention", {"causal", table.unpack(OPTS)})
  local n = dist.world_size(opts.group)
  if math.type(heads) ~= "integer" or heads % n ~= 0 then
    check.error(("Attention: heads (%s) must be a multiple of the %d ranks"):format(tostring(heads), n))
  end
  self.embed_dim, self.num_heads, self.group = d, heads, opts.group
  self.causal = opts.causal and true or false
  self.local_heads, self.head_dim = heads // n, d // heads
  self.proj = RowLinear(d, d, {bias = opts.bias, dtype = opts.dtype, group = opts.group, input_is_parallel = true})
  self:load_dense(nn.MultiheadAttention(d, heads, {causal = opts.causal, bias = opts.bias, dtype = opts.dtype,
                                                   generator = opts.generator}))
end

--- attention:load_dense(mha): this rank's heads of an nn.MultiheadAttention.
function Attention:load_dense(mha)
  local d, w = self.embed_dim, self.local_heads * self.head_dim
  local lo = dist.rank(self.group) * w
  local function rows(t)   -- this rank's rows of q, k and v, stacked as the packed weight is
    local parts = {}
    for k = 0, 2 do parts[k + 1] = t:detach():narrow(1, k * d + lo + 1, w) end
    return dle.cat(parts, 1):contiguous():requires_grad_(true)
  end
  dle.no_grad(function()
    self.qkv_weight = rows(mha.qkv.weight)
    if mha.qkv.bias then self.qkv_bias = rows(mha.qkv.bias) end
  end)
  self.proj._lo, self.proj._n = lo, w
  self.proj:load_dense(mha.proj)
  return self
end

function Attention:forward(x)
  if not dle.is_tensor(x) or x:dim() ~= 3 or x:size(3) ~= self.embed_dim then
    local got = dle.is_tensor(x) and check.shape_str(x) or type(x)
    check.error(("Attention: input must be {B, T, %d}, got %s"):format(self.embed_dim, got))
  end
  local B, T, H = x:size(1), x:size(2), self.local_heads
  local qkv = nn.functional.linear(CopyToRegion(x, self.group), self.qkv_weight, self.qkv_bias)
  local o = dle.sdpa(qkv:view(B, T, 3, H, self.head_dim):permute(3, 1, 4, 2, 5), {causal = self.causal})
  return self.proj(o:transpose(2, 3):reshape(B, T, H * self.head_dim))
end

local TransformerBlock = nn.Module:extend("TransformerBlock")

--- tensor_parallel.TransformerBlock(d, heads, {causal, mlp_ratio = 4, bias, group, dtype,
-- generator}): nn.TransformerBlock (pre-LayerNorm, no dropout) with its attention split by heads
-- and its MLP as ColumnLinear -> gelu -> RowLinear; the LayerNorms are whole on every rank. Two
-- all-reduces forward and two backward. Drawn as nn.TransformerBlock with the same options would
-- be, or taken from one with load_dense(block).
function TransformerBlock:init(d, heads, opts)
  opts = check.options(opts, "TransformerBlock", {"causal", "mlp_ratio", table.unpack(OPTS)})
  local dense = nn.TransformerBlock(d, heads, {causal = opts.causal, mlp_ratio = opts.mlp_ratio,
                                               bias = opts.bias, dtype = opts.dtype, generator = opts.generator})
  local o = {bias = opts.bias, dtype = opts.dtype, group = opts.group}
  self.ln1 = nn.LayerNorm(d, {dtype = opts.dtype})
  self.attn = Attention(d, heads, {causal = opts.causal, bias = opts.bias, dtype = opts.dtype,
                                   group = opts.group})
  self.ln2 = nn.LayerNorm(d, {dtype = opts.dtype})
  o.gather_output = false
  self.fc1 = ColumnLinear(d, dense.hidden, o)
  o.gather_output, o.input_is_parallel = nil, true
  self.fc2 = RowLinear(dense.hidden, d, o)
  self:load_dense(dense)
end

--- block:load_dense(block): the shares of an nn.TransformerBlock (LayerNorms whole).
function TransformerBlock:load_dense(block)
  dle.no_grad(function()
    for _, name in ipairs({"ln1", "ln2"}) do
      self[name].weight:copy_(block[name].weight)
      self[name].bias:copy_(block[name].bias)
    end
  end)
  self.attn:load_dense(block.attn)
  self.fc1:load_dense(block.fc1)
  self.fc2:load_dense(block.fc2)
  return self
end

function TransformerBlock:forward(x)
  x = x + self.attn(self.ln1(x))
  return x + self.fc2(self.fc1(self.ln2(x)):gelu())
end

M.ColumnLinear, M.RowLinear = ColumnLinear, RowLinear
M.Attention, M.TransformerBlock = Attention, TransformerBlock
return M
