-- errors_spec.lua — every user mistake raises a catchable Lua error whose message names the
-- function and the shapes/dtypes involved; nothing crashes and the tensors stay usable.
local dle = require "dle"
local H = require "helpers"

local err = H.assert_error

describe("errors", function()
  local a = dle.zeros(2, 3)

  it("shape mismatch in broadcasting names the op and both shapes", function()
    err(function() return a + dle.zeros(4) end, "add:", "{2,3}", "{4}", "broadcast")
    err(function() return a - dle.zeros(3, 3) end, "sub:", "{2,3}", "{3,3}")
    err(function() return a * dle.zeros(2, 2) end, "mul:", "{2,3}", "{2,2}")
    err(function() return a / dle.zeros(5) end, "div:", "{2,3}", "{5}")
    err(function() return a:maximum(dle.zeros(4)) end, "maximum:", "{2,3}", "{4}")
    err(function() return a:eq(dle.zeros(2, 4)) end, "eq:", "{2,3}", "{2,4}")
    err(function() return dle.where(dle.zeros(4):bool(), a, a) end, "where:", "{4}", "{2,3}")
    err(function() return a:add_(dle.zeros(2, 2)) end, "add:", "{2,3}", "{2,2}")
    err(function() return a:copy_(dle.zeros(3, 2)) end, "copy_", "{2,3}", "{3,2}")
  end)

  it("dim 0 is rejected as 1-based", function()
    err(function() return a:transpose(0, 1) end, "transpose:", "dim 0")
    err(function() return a:size(0) end, "size:", "dim 0")
    err(function() return a:select(0, 1) end, "select:", "dim 0")
    err(function() return a:narrow(0, 1, 1) end, "narrow:", "dim 0")
    err(function() return a:unsqueeze(0) end, "unsqueeze:", "dim 0")
    err(function() return a:squeeze(0) end, "squeeze:", "dim 0")
    err(function() return a:flatten(0) end, "flatten:", "dim 0")
  end)

  it("dims out of range name the function and the tensor's dims", function()
    err(function() return a:transpose(1, 3) end, "transpose:", "dim 3", "2-dim")
    err(function() return a:size(3) end, "size:", "dim 3")
    err(function() return a:stride(-3) end, "stride:", "dim -3", "2-dim")
    err(function() return a:squeeze(4) end, "squeeze:", "dim 4")
    err(function() return a:unsqueeze(-4) end, "unsqueeze:", "dim -4")
    err(function() return a:permute(1, 3) end, "permute:", "{2,3}")
    err(function() return a:flatten(2, 1) end, "flatten:")
  end)

  it("bad element indices name the index and the shape", function()
    err(function() return a[3] end, "index", "3", "{2,3}")
    err(function() return a[1][4] end, "index", "4", "{3}")
    err(function() return a:select(2, 4) end, "select:", "index 4", "{2,3}")
    err(function() return a:select(1, -3) end, "select:", "index -3", "{2,3}")
    err(function() return a:narrow(2, 2, 3) end, "narrow:", "start 2", "length 3", "{2,3}")
    err(function() a[0] = 1 end, "index", "{2,3}")
    err(function() return a[1.5] end, "index", "1.5")
    err(function() return a[true] end, "index", "boolean")
    assert.is_nil(a.no_such_method)   -- unknown names are nil, like any Lua table
  end)

  it("wrong dtype names are rejected, listing the valid ones", function()
    err(function() return dle.zeros(2, {dtype = "float33"}) end, "zeros:", "float33", "float32")
    err(function() return dle.tensor({1}, {dtype = "complex64"}) end, "tensor:", "complex64")
    err(function() return a:to("float33") end, "to:", "float33")
    err(function() return dle.arange(3, {dtype = 5}) end, "arange:", "dtype must be a string")
  end)

  it("negative sizes are rejected", function()
    err(function() return dle.zeros(-1) end, "zeros:", "negative size")
    err(function() return dle.ones(2, -3) end, "ones:", "negative size")
    err(function() return dle.full({-1}, 0) end, "full:", "negative size")
    err(function() return dle.eye(-2) end, "eye:")
    err(function() return a:view(-2, 3) end, "view:", "negative size")
    err(function() return a:expand(-2, 3) end, "expand:")
  end)

  -- found by the API fuzzer: view's size product overflowed int64 (UBSan)
  it("views with sizes whose product overflows are rejected", function()
    local t = dle.zeros(5, 5)
    err(function() return t:view(4, 1 << 62) end, "view:", "too many elements")
    err(function() return t:reshape(1 << 62, 1 << 62, -1) end, "too many elements")
    err(function() return dle.zeros(0):view(1 << 62, 1 << 62, 0) end, "view:", "too many elements")
    assert.same({0, 1 << 40}, dle.zeros(0):view(0, 1 << 40):shape())
  end)

  -- found by the API fuzzer: target - base < 0 overflowed for INT64_MIN (UBSan)
  it("int64 extremes as class targets and indices are out of range, not an overflow", function()
    local lo, hi = math.mininteger, math.maxinteger
    for _, v in ipairs({lo, hi}) do
      local t = dle.tensor({v}, {dtype = "int64"})
      err(function() return dle.cross_entropy(dle.zeros(1, 3), t) end, "cross_entropy", "out of range")
      err(function() return dle.nll_loss(dle.zeros(1, 3), t) end, "nll_loss", "out of range")
      err(function() return dle.embedding(dle.zeros(4, 2), t) end, "embedding", "out of range")
      err(function() return dle.zeros(2):index_select(1, t) end, "index_select", "out of range")
      err(function() return dle.tensor(1):cross_entropy_backward(dle.zeros(1, 3), t, dle.zeros(1)) end,
        "cross_entropy_backward", "out of range")
    end
    -- one_hot infers the class count from the largest class
    err(function() return dle.tensor({lo}, {dtype = "int64"}):one_hot() end, "one_hot", "out of range")
    err(function() return dle.tensor({hi}, {dtype = "int64"}):one_hot() end, "too many elements")
  end)

  it("ragged nested tables are rejected with the position", function()
    err(function() return dle.tensor({{1, 2, 3}, {4, 5}}) end, "tensor:", "ragged", "[2]", "2 entries", "expected 3")
    err(function() return dle.tensor({1, {2}}) end, "tensor:", "[2]")
  end)

  it("a view of non-viewable strides suggests reshape", function()
    err(function() return a:t():view(6) end, "view:", "{3,2}", "{6}", "reshape")
    err(function() return a:narrow(2, 1, 2):view(4) end, "view:", "{2,2}", "{4}")
  end)

  it("wrong argument types name the function", function()
    err(function() return dle.exp("abc") end, "exp", "dle.Tensor expected", "string")
    err(function() return a:add({}) end, "add:", "table")
    err(function() return a + "1" end, "add:", "string")
    err(function() return dle.same_storage(a, 3) end, "same_storage", "dle.Tensor expected")
    err(function() return a:copy_("x") end, "copy_", "dle.Tensor expected")
    err(function() return a:view("x") end, "view")
    err(function() return a:transpose("a", 1) end, "transpose:", "dim must be an integer", "string")
    err(function() return a:fill_("x") end, "fill_:", "string")
    err(function() return a:clamp("x") end, "clamp")
    err(function() return dle.zeros_like(3) end, "zeros_like", "dle.Tensor expected")
    err(function() return dle.full({2}, "x") end, "full:", "string")
    err(function() return dle.zeros(2, "float64") end, "zeros:", "options must be a table")
    err(function() return a:pow("x") end, "pow:", "string")
    err(function() a[1] = "x" end, "index", "string")
  end)

  -- found by the API fuzzer: these raised Lua runtime errors from inside dle's Lua code
  -- ("attempt to index a number value (local 'x')") instead of naming the function
  it("the Lua layers, functional forms and helpers name the function and argument", function()
    local nn, F = dle.nn, dle.nn.functional
    err(function() return F.relu(2) end, "relu:", "input must be a tensor", "number")
    err(function() return F.softmax("x") end, "softmax:", "input must be a tensor", "string")
    err(function() return F.linear(a, nil) end, "linear:", "weight must be a tensor", "nil")
    err(function() return F.linear(a, dle.zeros(3)) end, "linear:", "weight must be 2-D", "{3}")
    err(function() return F.max_pool2d(dle.zeros(1, 1, 2, 2), 2, 5) end, "max_pool2d:", "options must be a table")
    err(function() return nn.ReLU()(true) end, "ReLU:", "input must be a tensor", "boolean")
    err(function() return nn.Softmax("x") end, "Softmax:", "dim must be an integer")
    err(function() return nn.Flatten()(3) end, "Flatten:", "input must be a tensor")
    err(function() return nn.Linear(2, 3, 5) end, "Linear:", "options must be a table", "5")
    err(function() return nn.Linear(2, 3):apply(4) end, "Linear:apply:", "fn must be a function")
    err(function() return nn.Linear(2, 3):register_buffer(a, a) end, "register_buffer:", "name must be a string")
    err(function() return nn.init.calculate_gain(3) end, "calculate_gain:", "nonlinearity must be a string")
    err(function() return nn.init.normal_(dle.zeros(2), 0, 1, 7) end, "normal_:", "options must be a table")
    err(function() return nn.init.trunc_normal_(dle.zeros(2, 2), true) end, "trunc_normal_:", "std must be a number")
    err(function() return nn.utils.clip_grad_norm_({a, 3}, 1) end, "clip_grad_norm_:", "parameter 2", "number")
    err(function() return nn.utils.vector_to_parameters(4, {a}) end, "vector_to_parameters:", "vec must be a tensor")
    err(function() return F.causal_mask("x") end, "causal_mask:", "tq must be an integer")
    err(function() return dle.jvp(function(x) return x end, 3, 3) end, "jvp:", "inputs must be a tensor or a list")
    err(function() return dle.gradcheck(nil, {a}) end, "gradcheck:", "f must be a function")
    err(function() return dle.data.TensorDataset(nil, a) end, "TensorDataset:", "argument 1", "nil")
    err(function() return dle.set_printoptions({precision = "x"}) end, "set_printoptions:", "precision")
    err(function() return a:equal(3) end, "equal:", "other must be a tensor")
    err(function() return dle.io.json_decode(5) end, "json_decode:", "must be a string")
    err(function() a.foo = 1 end, "index:", "cannot set field 'foo'")
    -- dle.nn.Module() itself is an empty module (as PyTorch's nn.Module())
    assert.same({}, nn.Module():parameters())
  end)

  -- found while fuzzing: set_num_threads(100000) made OpenMP segfault on the next parallel kernel
  it("thread counts past the supported maximum are rejected and leave the count alone", function()
    local before = dle.get_num_threads()
    err(function() dle.set_num_threads(100000) end, "set_num_threads:", "100000", "at most 1024")
    err(function() dle.set_num_threads(math.maxinteger) end, "set_num_threads:", "at most")
    assert.are.equal(before, dle.get_num_threads())
    local big = dle.ones(1000, 1000)
    assert.are.equal(2e6, (big + big):sum():item())
  end)

  it("t:cuda() without a GPU gives a clear error", function()
    local ok = dle.cuda_available()
    if ok then return end   -- nothing to check on a machine with a GPU
    err(function() return a:cuda() end, "cuda", "not available")
    err(function() return a:to("cuda") end, "cuda", "not available")
    err(function() return dle.zeros(2, {device = "cuda"}) end, "cuda")
    err(function() return a:to("cuda:x") end, "to:", "cuda:x")
  end)

  it("a tensor used after <close> raises an error", function()
    local escaped
    do
      local t <close> = dle.ones(3)
      escaped = t
    end
    err(function() return escaped:numel() end, "closed")
    err(function() return escaped + 1 end, "closed")
    err(function() return tostring(escaped) end, "closed")
    err(function() return escaped[1] end, "closed")
  end)

  it("errors leave tensors usable and memory accounted", function()
    collectgarbage()
    collectgarbage()
    local before = dle.core.memory_allocated()
    for _ = 1, 50 do
      pcall(function() return dle.ones(100) + dle.ones(7) end)
      pcall(function() return dle.ones(100):view(7) end)
      pcall(function() return dle.tensor({{1}, {2, 3}}) end)
      pcall(function() return dle.where(dle.ones(3), dle.ones(3), dle.ones(3)) end)
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, dle.core.memory_allocated())
    assert.are.same({{0, 0, 0}, {0, 0, 0}}, a:totable())
  end)

  it("error messages have no 0-based leftovers for 1-based arguments", function()
    local m = err(function() return a:select(1, 5) end, "select:")
    assert.is_nil(m:find("index 4", 1, true))
    m = err(function() return a:narrow(1, 3, 1) end, "narrow:")
    assert.is_truthy(m:find("start 3", 1, true))
  end)
end)
