--- dle.quant: weight-only quantized tensors in GGUF's block formats (Q8_0, Q4_0, Q4_K; the
-- layouts are kernels/cpu/cpu_quant.h's). Adds to dle:
--   dle.quantize(t, kind)    a quantized tensor of t quantized along its last dimension
--   dle.is_quantized(v)
--   matmul(x, q) / matmul(x, q:t()) and x:matmul(...) with a quantized right operand: x @ W and
--   x @ W^T, activations in float32, W never expanded whole (engine/quant.c); x's gradient flows
--   (g @ W^T or g @ W, computed from the blocks as well), W's does not: it is no parameter.
-- A quantized tensor q: q:shape(), q:size(d), q:dim(), q:numel(), q:dtype() ("q8_0", ...),
-- q:nbytes() (its blocks), q:dequantize() (float32), q:t() (2-D: the transposed view, which
-- matmul takes as W^T), q:blocks() (the uint8 {rows, row bytes} tensor of raw blocks), printing.
local check = require("dle.check")

local M = {}

local KINDS = "q8_0, q4_0, q4_k"

function M.install(dle)
  local core = dle.core

  local Q = {}
  local QT = {__name = "dle.QuantizedTensor"}

  --- dle.is_quantized(v): whether v is a quantized tensor (dle.quantize, dle.load_gguf).
  -- @param v any value
  -- @return boolean
  local function is_quantized(v) return getmetatable(v) == QT end

  local function shape_str(s) return "{" .. table.concat(s, ",") .. "}" end

  -- values per block and bytes per block of kind, or an error naming fn
  local function kind_info(fn, kind)
    local block, bytes = nil, nil
    if type(kind) == "string" then block, bytes = core._qtype_info(kind) end
    if not block then
      check.error(string.format("%s: unknown quantization type %s (known: %s)", fn,
        type(kind) == "string" and string.format("%q", kind) or check.typename(kind), KINDS))
    end
    return block, bytes
  end

  --- Wraps raw blocks (a uint8 tensor {rows, row bytes}) as a quantized tensor of the given shape
  -- (quantized along shape's last dimension). What the GGUF loader uses; checked.
  -- @param fn string, the caller named in errors
  local function from_blocks(fn, blocks, kind, shape)
    local block, bytes = kind_info(fn, kind)
    local n = #shape
    local cols = shape[n]
    if n < 1 or math.type(cols) ~= "integer" or cols < 1 or cols % block ~= 0 then
      check.error(string.format("%s: %s needs the last dimension to be a multiple of %d, got shape %s", fn,
        kind, block, shape_str(shape)))
    end
    local rows = 1
    for i = 1, n - 1 do rows = rows * shape[i] end
    local want = {rows, cols // block * bytes}
    if not dle.is_tensor(blocks) or blocks:dtype() ~= "uint8" or shape_str(blocks:shape()) ~= shape_str(want) then
      check.error(string.format("%s: %s data for shape %s must be uint8 %s, got %s", fn, kind, shape_str(shape),
        shape_str(want), dle.is_tensor(blocks) and (blocks:dtype() .. " " .. shape_str(blocks:shape()))
        or check.typename(blocks)))
    end
    local s = {}
    for i = 1, n do s[i] = shape[i] end
    return setmetatable({_blocks = blocks:contiguous(), _kind = kind, _shape = s, _cols = cols}, QT)
  end
  M.from_blocks = from_blocks

  --- dle.quantize(t, kind): t (a float tensor on the CPU) quantized along its last dimension,
  -- which must be a multiple of the block (32 for q8_0 and q4_0, 256 for q4_k), with ggml's
  -- reference quantizers (round to nearest; q4_k's scales and mins by ggml's weighted search).
  -- @param t tensor
  -- @param kind "q8_0" | "q4_0" | "q4_k"
  -- @return quantized tensor
  function dle.quantize(t, kind)
    check.tensor(t, "quantize", "input")
    local block = kind_info("quantize", kind)
    if not t:is_floating_point() then
      check.error("quantize: input must be a float tensor, got " .. t:dtype() .. " " .. check.shape_str(t))
    end
    if t:dim() < 1 or t:size(-1) % block ~= 0 or t:size(-1) == 0 then
      check.error(string.format("quantize: %s needs the last dimension to be a multiple of %d, got shape %s",
        kind, block, check.shape_str(t)))
    end
    if t:device() ~= "cpu" then
      check.error("quantize: quantized tensors live on the CPU, got a tensor on " .. t:device())
    end
    local cols = t:size(-1)
    local x = t:detach():reshape(-1, cols):float():contiguous()
    return from_blocks("quantize", core._quantize(x, kind), kind, t:shape())
  end

  dle.is_quantized = is_quantized

  function Q:shape()
    local s = {table.unpack(self._shape)}
    if self._transposed then s[1], s[2] = s[2], s[1] end
    return s
  end
  function Q:dim() return #self._shape end
  function Q:size(d)
    local s = self:shape()
    if d == nil then return s end
    local i = math.type(d) == "integer" and (d < 0 and #s + 1 + d or d)
    if not i or i < 1 or i > #s then
      check.error(string.format("size: dim %s out of range for a %d-D quantized tensor", tostring(d), #s))
    end
    return s[i]
  end
  function Q:numel()
    local n = 1
    for _, v in ipairs(self._shape) do n = n * v end
    return n
  end
  function Q:dtype() return self._kind end
  function Q:device() return "cpu" end
  function Q:nbytes() return self._blocks:numel() end
  function Q:blocks() return self._blocks end
  function Q:is_transposed() return self._transposed == true end

  --- The float32 tensor the blocks stand for (of q's shape; a transposed view for q:t()).
  function Q:dequantize()
    local d = core._dequantize(self._blocks, self._kind, self._cols):view(self._shape)
    return self._transposed and d:t() or d
  end

  --- The transposed view of a 2-D quantized tensor (no copy): matmul(x, q:t()) is x @ W^T.
  function Q:t()
    if #self._shape ~= 2 then
      check.error("t: a quantized tensor must be 2-D to transpose, got shape " .. shape_str(self:shape()))
    end
    if not self._t then
      self._t = setmetatable({_blocks = self._blocks, _kind = self._kind, _shape = self._shape,
        _cols = self._cols, _transposed = not self._transposed, _t = self}, QT)
    end
    return self._t
  end

  -- No gradient reaches a quantized tensor: asking for one is an error, not a silent no-op.
  function Q:requires_grad_(on)
    if on ~= false then
      check.error("requires_grad_: a quantized " .. self._kind .. " tensor cannot require grad (dequantize() "
        .. "it for a float copy, or train a float adapter beside it)")
    end
    return self
  end

  QT.__tostring = function(self)
    return string.format("[dle.QuantizedTensor %s of size %s%s, %d bytes]", self._kind,
      table.concat(self:shape(), "x"), self._transposed and " (transposed)" or "", self:nbytes())
  end
  QT.__index = function(_, k)
    if k == "requires_grad" then return false end
    return Q[k]
  end

  -- x {..., inner} @ q as a 2-D product: W is q's {N, K}; transposed: x @ W^T.
  local function product(x2, q, transposed)
    return core._qmatmul(x2, q._blocks, q._kind, q._cols, transposed)
  end

  local QMatmul = dle.autograd.Function{
    name = "matmul",
    forward = function(ctx, x2, q, transposed)
      ctx.q, ctx.transposed = q, transposed
      return product(x2, q, transposed)
    end,
    backward = function(ctx, g)
      -- d(x W^T)/dx = g W and d(x W)/dx = g W^T: the other product with the same blocks
      return product(g:float():contiguous(), ctx.q, not ctx.transposed)
    end,
  }

  local function qmatmul(x, q)
    check.tensor(x, "matmul", "input")
    if #q._shape ~= 2 then
      check.error("matmul: a quantized weight must be 2-D, got shape " .. shape_str(q:shape()))
    end
    local qs = q:shape()
    if not x:is_floating_point() or x:dim() < 1 or x:size(-1) ~= qs[1] then
      check.error(string.format("matmul: shapes %s %s and %s %s cannot be multiplied", check.shape_str(x), x:dtype(),
        shape_str(qs), q._kind .. (q._transposed and " (transposed)" or "")))
    end
    if x:device() ~= "cpu" then
      check.error("matmul: a quantized weight computes on the CPU, got an input on " .. x:device())
    end
    local lead = x:shape()
    local dtype = x:dtype()
    local x2 = x:reshape(-1, qs[1])
    if dtype ~= "float32" then x2 = x2:float() end
    x2 = x2:contiguous()
    local y
    if x.requires_grad and dle.is_grad_enabled() then
      y = QMatmul(x2, q, q._transposed == true)
    else
      y = product(x2, q, q._transposed == true)
    end
    lead[#lead] = qs[2]
    y = y:view(lead)
    return dtype ~= "float32" and y:to(dtype) or y
  end
  M.matmul = qmatmul

  -- dle.matmul (C) hands a call with a quantized operand here: x @ W (b = q) or x @ W^T (b = q:t())
  core._set_qmatmul(function(a, b)
    if not is_quantized(b) then
      check.error("matmul: a quantized tensor can only be the right operand (the weight), got it on the left")
    end
    return qmatmul(a, b)
  end)
end

return M
