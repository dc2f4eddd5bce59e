--- PyTorch's rearranging and matrix-product helpers as compositions of dle ops (index_select,
-- narrow, cat, expand, reshape, matmul), so autograd (both modes), dtypes, devices and tracing come
-- from those ops: fliplr, flipud, repeat (dle["repeat"], a Lua keyword), tile,
-- repeat_interleave, meshgrid, diag, trace, tensordot, kron, rot90, baddbmm, addbmm,
-- addmv, addr (flip, roll, diagonal and F.pad are C ops: bindings/lua_arrange.c). Dims are 1-based
-- (negative from the end), as everywhere in dle. They are not fused kernels: each costs the copies
-- its ops make.
local check = require("dle.check")

local M = {}

function M.install(dle)
  local Tensor = dle.Tensor

  local function tensor(fn, x, what)
    if not dle.is_tensor(x) then
      check.error(string.format("%s: %s must be a tensor, got %s", fn, what or "input", check.typename(x)))
    end
    return x
  end
  -- a 1-based (or negative) dim of an n-dim tensor, as a positive 1-based dim
  local function dim_of(fn, d, n)
    if math.type(d) ~= "integer" then
      check.error(string.format("%s: dim must be an integer, got %s", fn, tostring(d)))
    end
    local r = d < 0 and n + 1 + d or d
    if r < 1 or r > n then
      check.error(string.format("%s: dim %d is out of range for a %d-dim tensor (1..%d or -%d..-1)", fn, d, n, n, n))
    end
    return r
  end
  local function dims_list(fn, dims, n)
    if type(dims) == "number" then dims = {dims} end
    if type(dims) ~= "table" then check.error(fn .. ": dims must be an integer or a list of integers") end
    local out, seen = {}, {}
    for i, d in ipairs(dims) do
      out[i] = dim_of(fn, d, n)
      if seen[out[i]] then check.error(string.format("%s: dim %d appears twice", fn, d)) end
      seen[out[i]] = true
    end
    return out
  end
  local function index(list, device)
    return dle.tensor(list, {dtype = "int64", device = device})
  end
  local function sizes_of(fn, ...)
    local s = {...}
    if #s == 1 and type(s[1]) == "table" then s = s[1] end
    for i, v in ipairs(s) do
      if math.type(v) ~= "integer" or v < 0 then
        check.error(string.format("%s: size %d must be a non-negative integer, got %s", fn, i, tostring(v)))
      end
    end
    return s
  end

  --- dle.fliplr(x): flip along dim 2 (x at least 2-D).
  function Tensor.fliplr(x)
    if tensor("fliplr", x):dim() < 2 then
      check.error("fliplr: input must be at least 2-D, got " .. check.shape_str(x))
    end
    return x:flip(2)
  end
  --- dle.flipud(x): flip along dim 1 (x at least 1-D).
  function Tensor.flipud(x)
    if tensor("flipud", x):dim() < 1 then check.error("flipud: input must be at least 1-D, got a 0-dim tensor") end
    return x:flip(1)
  end

  -- x repeated r[i] times along each dim (len(r) >= dim; leading dims are new)
  local function repeated(fn, x, r)
    local n = x:dim()
    if #r < n then
      check.error(string.format("%s: %d repeats for a %d-dim tensor (at least as many as dims)", fn, #r, n))
    end
    local shape = x:shape()
    while #shape < #r do table.insert(shape, 1, 1) end
    x = x:reshape(shape)
    local view, expand, final = {}, {}, {}
    for i, s in ipairs(shape) do
      view[#view + 1], view[#view + 2] = 1, s
      expand[#expand + 1], expand[#expand + 2] = r[i], s
      final[i] = r[i] * s
    end
    return x:reshape(view):expand(expand):reshape(final)
  end
  --- dle["repeat"](x, sizes...) / x["repeat"](x, sizes...): x tiled sizes[i] times along dim i
  -- (torch.Tensor.repeat; `repeat` is a Lua keyword, hence the brackets; dle.tile is the same
  -- with fewer sizes allowed).
  Tensor["repeat"] = function(x, ...)
    return repeated("repeat", tensor("repeat", x), sizes_of("repeat", ...))
  end
  --- dle.tile(x, dims) / x:tile(dims): x repeated dims[i] times along each dim; fewer dims than
  -- x has repeat its last dims (torch.tile).
  function Tensor.tile(x, ...)
    tensor("tile", x)
    local r = sizes_of("tile", ...)
    while #r < x:dim() do table.insert(r, 1, 1) end
    return repeated("tile", x, r)
  end

  --- dle.repeat_interleave(x, repeats, dim) / x:repeat_interleave(repeats, dim): each element
  -- repeated `repeats` times (an integer, or an int64 tensor of one count per element) along dim;
  -- without dim over the flattened tensor (torch.repeat_interleave).
  function Tensor.repeat_interleave(x, repeats, dim)
    tensor("repeat_interleave", x)
    if dim == nil then x, dim = x:reshape(-1), 1 end
    local d = dim_of("repeat_interleave", dim, x:dim())
    local n = x:size(d)
    local counts
    if math.type(repeats) == "integer" then
      if repeats < 0 then check.error("repeat_interleave: repeats must not be negative") end
      counts = {}
      for i = 1, n do counts[i] = repeats end
    elseif dle.is_tensor(repeats) then
      counts = repeats:reshape(-1):totable()
      if #counts == 1 and n ~= 1 then for i = 2, n do counts[i] = counts[1] end end
      if #counts ~= n then
        check.error(string.format("repeat_interleave: %d repeats for %d elements along dim %d", #counts, n, d))
      end
    else
      check.error("repeat_interleave: repeats must be an integer or an int64 tensor")
    end
    local idx = {}
    for i, c in ipairs(counts) do
      if math.type(c) ~= "integer" or c < 0 then
        check.error("repeat_interleave: repeats must be non-negative integers")
      end
      for _ = 1, c do idx[#idx + 1] = i end
    end
    if #idx == 0 then return x:narrow(d, 1, 0) end
    return x:index_select(d, index(idx, x:device()))
  end

  --- dle.meshgrid(t1, t2, ..., {indexing = "ij" | "xy"}) -> one tensor per input, each of the
  -- grid's shape (expanded views): indexing "ij" (the default) gives shape {#t1, #t2, ...}, "xy"
  -- swaps the first two (torch.meshgrid).
  function dle.meshgrid(...)
    local ts = table.pack(...)
    for i = 1, ts.n do
      if ts[i] == nil then check.error(string.format("meshgrid: input %d must be a tensor, got nil", i)) end
    end
    ts.n = nil
    local opts = {}
    if #ts > 0 and type(ts[#ts]) == "table" and not dle.is_tensor(ts[#ts]) then opts = table.remove(ts) end
    if #ts == 1 and type(ts[1]) == "table" and not dle.is_tensor(ts[1]) then ts = ts[1] end
    opts = check.options(opts, "meshgrid", {"indexing"})
    local xy = opts.indexing == "xy"
    if opts.indexing ~= nil and opts.indexing ~= "ij" and not xy then
      check.error("meshgrid: indexing must be \"ij\" or \"xy\", got " .. tostring(opts.indexing))
    end
    if #ts == 0 then check.error("meshgrid: expects at least one tensor") end
    local shape = {}
    for i, t in ipairs(ts) do
      if not dle.is_tensor(t) or t:dim() > 1 then
        check.error(string.format("meshgrid: input %d must be a 0-dim or 1-D tensor", i))
      end
      shape[i] = t:numel()
    end
    if xy and #ts >= 2 then shape[1], shape[2] = shape[2], shape[1] end
    local out = {}
    for i, t in ipairs(ts) do
      local pos = i
      if xy and #ts >= 2 and i <= 2 then pos = 3 - i end
      local view = {}
      for k = 1, #ts do view[k] = k == pos and shape[pos] or 1 end
      out[i] = t:reshape(view):expand(shape)
    end
    return table.unpack(out)
  end

  --- dle.diag(x, diagonal) / x:diag(diagonal): a 1-D x as the given diagonal of a square matrix
  -- (zeros elsewhere), or a 2-D x's diagonal as a 1-D tensor (torch.diag).
  function Tensor.diag(x, k)
    tensor("diag", x)
    k = k or 0
    if math.type(k) ~= "integer" then check.error("diag: diagonal must be an integer") end
    if x:dim() == 2 then return x:diagonal(k) end
    if x:dim() ~= 1 then check.error("diag: input must be 1-D or 2-D, got " .. check.shape_str(x)) end
    return dle.diag_embed(x, k)
  end

  --- dle.trace(x) / x:trace(): the sum of a 2-D tensor's diagonal.
  function Tensor.trace(x)
    if tensor("trace", x):dim() ~= 2 then check.error("trace: input must be 2-D, got " .. check.shape_str(x)) end
    return x:diagonal():sum()
  end

  --- dle.tensordot(a, b, dims): the sum over dims of a and b; dims an integer n (the last n of a
  -- with the first n of b) or {{dims of a}, {dims of b}} (torch.tensordot).
  function dle.tensordot(a, b, dims)
    tensor("tensordot", a, "a")
    tensor("tensordot", b, "b")
    local da, db
    if math.type(dims) == "integer" then
      if dims < 0 or dims > a:dim() or dims > b:dim() then
        check.error("tensordot: dims " .. dims .. " out of range")
      end
      da, db = {}, {}
      for i = 1, dims do da[i], db[i] = a:dim() - dims + i, i end
    elseif type(dims) == "table" and type(dims[1]) == "table" and type(dims[2]) == "table" then
      da, db = dims_list("tensordot", dims[1], a:dim()), dims_list("tensordot", dims[2], b:dim())
      if #da ~= #db then check.error("tensordot: the two dim lists differ in length") end
    else
      check.error("tensordot: dims must be an integer or {{dims of a}, {dims of b}}")
    end
    local k = 1
    for i = 1, #da do
      if a:size(da[i]) ~= b:size(db[i]) then
        check.error(string.format("tensordot: dim %d of a (%d) and dim %d of b (%d) differ", da[i], a:size(da[i]),
                                  db[i], b:size(db[i])))
      end
      k = k * a:size(da[i])
    end
    local in_a, in_b = {}, {}
    for _, d in ipairs(da) do in_a[d] = true end
    for _, d in ipairs(db) do in_b[d] = true end
    local pa, pb, out = {}, {}, {}
    for d = 1, a:dim() do if not in_a[d] then pa[#pa + 1] = d; out[#out + 1] = a:size(d) end end
    for _, d in ipairs(da) do pa[#pa + 1] = d end
    for _, d in ipairs(db) do pb[#pb + 1] = d end
    for d = 1, b:dim() do if not in_b[d] then pb[#pb + 1] = d; out[#out + 1] = b:size(d) end end
    local A = a:permute(pa):reshape(-1, k)
    local Bm = b:permute(pb):reshape(k, -1)
    return A:matmul(Bm):reshape(out)
  end

  --- dle.kron(a, b): the Kronecker product (torch.kron), shape a.shape * b.shape (dims padded).
  function dle.kron(a, b)
    tensor("kron", a, "a")
    tensor("kron", b, "b")
    local n = math.max(a:dim(), b:dim())
    local sa, sb = a:shape(), b:shape()
    while #sa < n do table.insert(sa, 1, 1) end
    while #sb < n do table.insert(sb, 1, 1) end
    local va, vb, out = {}, {}, {}
    for i = 1, n do
      va[#va + 1], va[#va + 2] = sa[i], 1
      vb[#vb + 1], vb[#vb + 2] = 1, sb[i]
      out[i] = sa[i] * sb[i]
    end
    return (a:reshape(va) * b:reshape(vb)):reshape(out)
  end

  --- dle.rot90(x, k, dims) / x:rot90(k, dims): x rotated k times by 90 degrees in the plane of
  -- dims (default {1, 2}), from the first toward the second (torch.rot90).
  function Tensor.rot90(x, k, dims)
    tensor("rot90", x)
    if k ~= nil and math.type(k) ~= "integer" then
      check.error("rot90: k must be an integer, got " .. check.typename(k))
    end
    k = (k or 1) % 4
    local ds = dims_list("rot90", dims or {1, 2}, x:dim())
    if #ds ~= 2 then check.error("rot90: dims must hold two dims") end
    local a, b = ds[1], ds[2]
    if k == 1 then return x:flip(b):transpose(a, b) end
    if k == 2 then return x:flip({a, b}) end
    if k == 3 then return x:flip(a):transpose(a, b) end
    return x:clone()
  end

  -- beta * input + alpha * product, PyTorch's convention for the add* products
  local function scaled_sum(fn, input, product, opts)
    opts = check.options(opts, fn, {"beta", "alpha"})
    local beta, alpha = opts.beta or 1, opts.alpha or 1
    local p = alpha == 1 and product or product * alpha
    if beta == 0 then return p + input * 0 end -- PyTorch ignores input's values (NaN included) then
    return (beta == 1 and input or input * beta) + p
  end
  --- dle.baddbmm(input, b1, b2, {beta = 1, alpha = 1}): beta input + alpha (b1 @ b2), batched.
  function dle.baddbmm(input, b1, b2, opts)
    return scaled_sum("baddbmm", tensor("baddbmm", input), tensor("baddbmm", b1, "batch1"):bmm(b2), opts)
  end
  --- dle.addbmm(input, b1, b2, {beta, alpha}): beta input + alpha sum_i (b1[i] @ b2[i]).
  function dle.addbmm(input, b1, b2, opts)
    return scaled_sum("addbmm", tensor("addbmm", input), tensor("addbmm", b1, "batch1"):bmm(b2):sum(1), opts)
  end
  --- dle.addmv(input, mat, vec, {beta, alpha}): beta input + alpha (mat @ vec).
  function dle.addmv(input, mat, vec, opts)
    return scaled_sum("addmv", tensor("addmv", input), tensor("addmv", mat, "mat"):matmul(vec), opts)
  end
  --- dle.addr(input, v1, v2, {beta, alpha}): beta input + alpha outer(v1, v2).
  function dle.addr(input, v1, v2, opts)
    return scaled_sum("addr", tensor("addr", input), dle.outer(tensor("addr", v1, "vec1"), v2), opts)
  end

  -- errors of the ops inside name the function called (check.call), as a kernel's would
  local named = check.named
  for _, name in ipairs({"fliplr", "flipud", "repeat", "tile", "repeat_interleave",
                         "diag", "trace", "rot90"}) do
    Tensor[name] = named(name, Tensor[name])
    dle[name] = Tensor[name]
  end
  for _, name in ipairs({"meshgrid", "tensordot", "kron", "baddbmm", "addbmm", "addmv", "addr"}) do
    dle[name] = named(name, dle[name])
  end
end

return M
