-- onnx_export_spec.lua — dle.onnx.save: models and single ops written, read back with
-- dle.onnx.load and compared with the original (1e-5), every file checked by python3-onnx's
-- onnx.checker (full_check; all files in one process, by the last test) when /usr/bin/python3 has
-- onnx; the op table walked so that every op either exports or is listed with a reason; errors
-- for what cannot be written.
local dle = require("dle")
local H = require("helpers")
local nn = dle.nn
local F = nn.functional

local have_onnx = os.execute("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1") == true
local dir = H.tmpdir()
local count = 0

local written = {}   -- every file roundtrip wrote, checked together by the last test

-- onnx.checker's verdicts on the files (one Python process): the lines "path: message" of those
-- it rejects, or "ok".
local function onnx_check(paths)
  local list = dir .. "/files.txt"
  local f = assert(io.open(list, "w"))
  f:write(table.concat(paths, "\n"), "\n")
  f:close()
  local p = io.popen(("/usr/bin/python3 -c \"import onnx, sys\n"
    .. "bad = []\n"
    .. "for p in open('%s').read().split():\n"
    .. "    try: onnx.checker.check_model(onnx.load(p), full_check=True)\n"
    .. "    except Exception as e: bad.append(p + ': ' + str(e).splitlines()[0])\n"
    .. "print('\\n'.join(bad) or 'ok')\" 2>&1"):format(list))
  local out = p:read("a")
  p:close()
  return out
end

local function each(v, f)
  if dle.is_tensor(v) then return f(v) end
  for _, t in ipairs(v) do f(t) end
end

-- Saves f on inputs, reloads, and asserts the reloaded model gives f's results on `check_inputs`
-- (default: the same inputs) within tol; the file is noted for the checker. Returns the path.
local function roundtrip(f, inputs, opts, check_inputs, tol)
  count = count + 1
  local path = ("%s/m%d.onnx"):format(dir, count)
  dle.onnx.save(path, f, inputs, opts)
  written[#written + 1] = path
  local m = dle.onnx.load(path, {requires_grad = false})
  for _, xs in ipairs(check_inputs or {inputs}) do
    local want = table.pack(f(table.unpack(xs)))
    local got = table.pack(m(table.unpack(xs)))
    local flat_want = {}
    for i = 1, want.n do each(want[i], function(t) flat_want[#flat_want + 1] = t end) end
    assert.are.equal(#flat_want, got.n)
    for i, w in ipairs(flat_want) do
      local g = got[i]
      assert.are.same(w:shape(), g:shape())
      assert.are.equal(w:dtype(), g:dtype())
      if w:dtype() == "bool" then
        assert.is_true(w:eq(g):all():item(), "result " .. i .. " differs")
      else
        assert.is_true(H.max_diff(w, g) <= (tol or 1e-5), ("result %d differs by %g"):format(i, H.max_diff(w, g)))
      end
    end
  end
  return path
end

describe("dle.onnx.save", function()
  local gen = dle.Generator(7)
  local function randn(...) return dle.randn({...}, {generator = gen}) end
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  it("walks dle's op table: every op either exports or is listed as not expressible with a reason", function()
    local yes, no = dle.onnx.exportable()
    local n_yes = 0
    for _, info in ipairs(require("dle.core").op_table()) do
      local name = info.name
      assert.is_true(yes[name] ~= nil or no[name] ~= nil, name .. " is in neither list")
      assert.is_false(yes[name] ~= nil and no[name] ~= nil, name .. " is in both lists")
      if no[name] then
        assert.are_not.equal("no export mapping", no[name], name .. " has no mapping and no reason")
      else
        n_yes = n_yes + 1
      end
    end
    assert.is_true(yes.cond and yes.scan and yes.while_loop)
    assert.is_true(n_yes >= 80, "only " .. n_yes .. " ops export")
  end)

  it("writes an MLP with a dynamic batch that runs at other batch sizes after re-import", function()
    local m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.LayerNorm(8), nn.Linear(8, 3), nn.Softmax(2))
    local path = roundtrip(m, {randn(2, 4)}, {dynamic_axes = {input = {[1] = "batch"}, output = {[1] = "batch"}}},
                           {{randn(2, 4)}, {randn(5, 4)}, {randn(1, 4)}})
    local parsed = dle.onnx.parse(path)
    assert.are.equal("batch", parsed.graph.inputs[1].type.shape[1])
    assert.are.equal("batch", parsed.graph.outputs[1].type.shape[1])
    local names = {}
    for _, init in ipairs(parsed.graph.initializers) do names[init.name] = true end
    assert.is_true(names["1.weight"] and names["4.bias"], "parameters are initializers named as in the module")
    assert.are.equal(17, parsed.opset_import[""])
  end)

  it("writes a CNN with batch norm in eval mode (Conv, BatchNormalization, pools, flatten)", function()
    local m = nn.Sequential(nn.Conv2d(3, 8, 3, {padding = 1}), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(8, 4, 3, {stride = 2, groups = 4}), nn.AvgPool2d(2), nn.Flatten(),
                            nn.Linear(4, 5))
    -- running statistics that are not the initial ones
    m:train()
    for _ = 1, 3 do m(randn(4, 3, 12, 12)) end
    m:eval()
    roundtrip(m, {randn(2, 3, 12, 12)}, {dynamic_axes = {input = {[1] = "N"}}},
              {{randn(2, 3, 12, 12)}, {randn(3, 3, 12, 12)}})
  end)

  it("writes the char-GPT model (embeddings, causal attention blocks, tied head) at opsets 17 and 14", function()
    local GPT = dofile("examples/char_gpt/model.lua")
    local m = GPT({vocab = 11, context = 8, d = 16, heads = 2, layers = 2, tie = true})
    m:eval()
    local ids = dle.tensor({{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 1}}, {dtype = "int64"})
    for _, opset in ipairs({17, 14}) do roundtrip(m, {ids}, {opset = opset}) end
  end)

  it("writes nn.LSTM and nn.GRU (their fused cells as ONNX arithmetic)", function()
    local lstm, gru = nn.LSTM(5, 6, {num_layers = 2}), nn.GRU(5, 4, {bidirectional = true})
    local x = randn(7, 3, 5)
    roundtrip(function(a) return (lstm(a)) end, {x})
    roundtrip(function(a) return (gru(a)) end, {x})
  end)

  it("writes a transformer encoder layer with a key padding mask", function()
    local block = nn.TransformerBlock(16, 4, {causal = false})
    block:eval()
    local mha = nn.MultiheadAttention(16, 4)
    local x = randn(2, 5, 16)
    roundtrip(function(a) return block(a) end, {x})
    roundtrip(function(a) return mha(a) end, {x})
  end)

  it("writes dle.cond as If, dle.scan as Scan and dle.while_loop as Loop, each branch re-run at import", function()
    local w = randn(3, 3)
    local function f(x, h0)
      local y = dle.cond(x:sum():gt(0), function(a) return a:matmul(w):tanh() end, function(a) return -a * 2 end, x)
      local h, ys = dle.scan(function(h, xt) h = (h + xt):matmul(w):tanh(); return h, h * 2 end, h0, y)
      local i, s = table.unpack(dle.while_loop(function(i) return i:lt(5) end,
                                  function(i, s) return i + 1, s * 1.5 + h end, {dle.tensor(0), h}))
      return y, h, ys, i, s
    end
    local x = randn(4, 3)
    local path = roundtrip(f, {x, randn(3)}, nil, {{x, randn(3)}, {-x:abs(), randn(3)}})
    local kinds = {}
    for _, n in ipairs(dle.onnx.parse(path).graph.nodes) do kinds[n.op_type] = true end
    assert.is_true(kinds.If and kinds.Scan and kinds.Loop)
  end)

  -- one case per exportable op: a function of random inputs whose trace holds that op
  local float_cases = {
    neg = function(x) return -x end, abs = "abs", sign = "sign", exp = "exp",
    log = function(x) return x:abs():log() end,
    expm1 = "expm1", log1p = function(x) return x:abs():log1p() end, sqrt = function(x) return x:abs():sqrt() end,
    rsqrt = function(x) return (x:abs() + 0.1):rsqrt() end, reciprocal = "reciprocal", sin = "sin", cos = "cos",
    tanh = "tanh", sigmoid = "sigmoid", relu = "relu", gelu = "gelu", silu = "silu", floor = "floor", ceil = "ceil",
    round = "round", trunc = "trunc", frac = "frac", tan = "tan", asin = function(x) return (x * 0.3):asin() end,
    acos = function(x) return (x * 0.3):acos() end, atan = "atan", sinh = "sinh", cosh = "cosh", asinh = "asinh",
    acosh = function(x) return (x:abs() + 1):acosh() end, atanh = function(x) return (x * 0.3):atanh() end,
    erf = "erf", erfc = "erfc", log2 = function(x) return x:abs():log2() end,
    log10 = function(x) return x:abs():log10() end, exp2 = "exp2",
    isnan = function(x) return (x:log()):isnan() end, isinf = function(x) return (x:abs():log()):isinf() end,
    isfinite = function(x) return x:log():isfinite() end,
    logical_not = function(x) return x:gt(0):logical_not() end,
    pow_scalar = function(x) return x:pow(3) end, clamp = function(x) return x:clamp(-0.5, 0.5) end,
    add = function(x, y) return x + y end, sub = function(x, y) return x - y end, mul = function(x, y) return x * y end,
    div = function(x, y) return x / y end, pow = function(x, y) return x:abs():pow(y) end,
    maximum = function(x, y) return dle.maximum(x, y) end, minimum = function(x, y) return dle.minimum(x, y) end,
    fmod = function(x, y) return dle.fmod(x, y) end, remainder = function(x, y) return dle.remainder(x, y) end,
    floor_divide = function(x, y) return dle.floor_divide(x, y) end, hypot = function(x, y) return dle.hypot(x, y) end,
    logaddexp = function(x, y) return dle.logaddexp(x, y) end,
    eq = function(x, y) return x:round():eq(y:round()) end, ne = function(x, y) return x:round():ne(y:round()) end,
    lt = function(x, y) return x:lt(y) end, le = function(x, y) return x:le(y) end,
    gt = function(x, y) return x:gt(y) end, ge = function(x, y) return x:ge(y) end,
    where = function(x, y) return dle.where(x:gt(y), x, y) end,
    masked_fill = function(x, y) return x:masked_fill(y:gt(0), 2.5) end,
    sum = function(x) return x:sum(2) end, mean = function(x) return x:mean(1, true) end,
    prod = function(x) return x:prod(2) end,
    amax = function(x) return x:amax(2) end, amin = function(x) return x:amin() end,
    logsumexp = function(x) return x:logsumexp(2) end, var = function(x) return x:var(2) end,
    std = function(x) return x:std(1, {keepdim = true}) end,
    max = function(x) return {x:max(2)} end, min = function(x) return {x:min(1)} end,
    argmax = function(x) return x:argmax(2) end, argmin = function(x) return x:argmin(1) end,
    softmax = function(x) return x:softmax(2) end, log_softmax = function(x) return x:log_softmax(1) end,
    cumsum = function(x) return x:cumsum(2) end,
    matmul = function(x, y) return x:matmul(y:t()) end, copy = function(x) return x:to("float64") end,
    view = function(x) return x:reshape({-1}) end, permute = function(x) return x:t() + 0 end,
    expand = function(x) return x:reshape({1, 4, 5}):expand({3, 4, 5}) + 0 end,
    narrow = function(x) return x:narrow(2, 2, 3) + 0 end, select = function(x) return x[2] + 0 end,
    cat = function(x, y) return dle.cat({x, y}, 2) end,
    gather = function(x) return dle.gather(x, 2, dle.tensor({{1, 5}, {2, 2}, {3, 1}, {4, 4}}, {dtype = "int64"})) end,
    index_select = function(x) return x:index_select(2, dle.tensor({5, 1}, {dtype = "int64"})) end,
    scatter_add = function(x, y)
      return dle.scatter_add(x, 2, dle.tensor({{1, 1}, {2, 5}, {3, 3}, {4, 4}}, {dtype = "int64"}), y:narrow(2, 1, 2))
    end,
    embedding = function(x) return F.embedding(dle.tensor({{3, 1}, {4, 4}}, {dtype = "int64"}), x) end,
    tril = function(x) return x:tril() end, triu = function(x) return x:triu(1) end,
    topk = function(x) return {x:topk(2, 2)} end, sort = function(x) return {x:sort(2, {descending = true})} end,
    full = function(x) return x + dle.ones({4, 5}) end, arange = function(x) return x + dle.arange(5) end,
    linalg_det = function(x) return dle.linalg.det(x:narrow(2, 1, 4)) end,
    conv2d = function(x)
      local w = x:narrow(2, 1, 3):narrow(1, 1, 3):reshape({1, 1, 3, 3})
      return F.conv2d(x:reshape({1, 1, 4, 5}), w, nil, {padding = 1})
    end,
    max_pool2d = function(x) return F.max_pool2d(x:reshape({1, 1, 4, 5}), 2) end,
    avg_pool2d = function(x)
      return F.avg_pool2d(x:reshape({1, 1, 4, 5}), 2, {padding = 1, count_include_pad = false})
    end,
    batch_norm = function(x) return F.batch_norm(x:reshape({2, 2, 5}), dle.tensor({0.1, -0.2}), dle.tensor({1.5, 0.5}),
                                                 dle.tensor({2, 3}), dle.tensor({0.5, 0}), false, 0.1, 1e-5) end,
    layer_norm = function(x) return F.layer_norm(x, {5}) end,
    sdpa = function(x, y)
      local q, k = x:reshape({1, 4, 5}), y:reshape({1, 4, 5})
      local mask = dle.tensor({{true, false, true, true}}, {dtype = "bool"})
      return {F.scaled_dot_product_attention(q, k, q, {causal = true}),
              F.scaled_dot_product_attention(q, k, q, {mask = mask})}
    end,
    lstm_cell_fused = function(x, y)   -- N = 1, H = 5: gates {1, 20}
      local h, c = dle.lstm_cell_fused(x:reshape({1, 20}), y:reshape({1, 20}), y[1]:reshape({1, 5}))
      return {h, c}
    end,
    gru_cell_fused = function(x, y)   -- N = 4, H = 5: gates {4, 15}
      return (dle.gru_cell_fused(dle.cat({x, y, x}, 2), dle.cat({y, x, y}, 2), x))
    end,
    nan_to_num = function(x)
      local y = x:log()   -- NaN below 0, -inf at 0
      y = dle.where(x:gt(1), x / 0, y)   -- +inf above 1
      return dle.nan_to_num(y, {nan = 7, posinf = 9, neginf = -9})
    end,
    fmax = function(x, y) return dle.fmax(x:log(), y) end,
    fmin = function(x, y) return dle.fmin(x, y:log()) end,
    copysign = function(x, y) return dle.copysign(x, dle.where(y:gt(1), -(y * 0), y)) end,   -- -0.0 too
    atan2 = function(x, y)
      local yy = dle.where(y:abs():lt(0.3), y * 0, y)   -- x = 0 on the axis cases too
      return dle.atan2(x, yy)
    end,
    one_hot = function(x) return F.one_hot((x:abs() * 2):floor():to("int64"):clamp(0, 3) + 1, 4) end,
    kthvalue = function(x) return {x:kthvalue(2, 2), x:kthvalue(3, 1, true)} end,
    index_add = function(x, y)
      return x:index_add(2, dle.tensor({2, 5}, {dtype = "int64"}), y:narrow(2, 1, 2))
    end,
    diagonal = function(x)
      local x3 = x:reshape({2, 2, 5})
      return {dle.diagonal(x, 1) + 0, dle.diagonal(x, -2) + 0, dle.diagonal(x3, 1, 3, 1) + 0, x:diag(-1) + 0}
    end,
    masked_scatter = function(x, y)
      return {dle.masked_scatter(x, y:gt(0), y * 10), dle.masked_scatter(x, y[1]:gt(0), x * -1)}   -- broadcast mask
    end,
    flip = function(x) return dle.flip(x, {1, 2}) end,
    roll = function(x) return dle.roll(x, {2, -1}, {1, 2}) end,
    pad = function(x)
      local x4 = x:reshape({1, 1, 4, 5})
      return {F.pad(x, {1, 2}, {value = 0.5}), F.pad(x, {-1, 2, 1, 0}), F.pad(x4, {2, 1, 1, 3}, {mode = "reflect"}),
              F.pad(x4, {2, 1, 1, 3}, {mode = "replicate"}), F.pad(x4, {2, 1, 1, 3}, {mode = "circular"})}
    end,
    group_norm = function(x, y)
      return {F.group_norm(x:reshape({2, 2, 5}), 2), F.group_norm(x:reshape({1, 4, 5}), 2, y[1]:narrow(1, 1, 4),
                                                                  y[2]:narrow(1, 1, 4))}
    end,
    upsample = function(x)
      local x4 = x:reshape({1, 1, 4, 5})
      return {F.interpolate(x4, {size = {7, 9}}), F.interpolate(x4, {scale_factor = 2, mode = "nearest"}),
              F.interpolate(x4, {size = {6, 11}, mode = "nearest-exact"}),
              F.interpolate(x4, {size = {7, 3}, mode = "bilinear"}),
              F.interpolate(x4, {size = {7, 9}, mode = "bilinear", align_corners = true}),
              F.interpolate(x4, {size = {8, 10}, mode = "bicubic"}),
              F.interpolate(x:reshape({1, 4, 5}), {scale_factor = 1.5, mode = "linear"})}
    end,
    scatter = function(x, y)
      return dle.scatter(x, 2, dle.tensor({{1, 2}, {2, 5}, {3, 4}, {4, 1}}, {dtype = "int64"}), y:narrow(2, 1, 2))
    end,
    scatter_reduce = function(x, y)
      local i = dle.tensor({{1, 1}, {2, 5}, {3, 3}, {4, 4}}, {dtype = "int64"})
      local src = y:narrow(2, 1, 2)
      return {dle.scatter_reduce(x, 2, i, src, "sum"), dle.scatter_reduce(x, 2, i, src, "prod")}
    end,
  }

  it("writes every exportable op singly (a case per op, random inputs) and reads it back", function()
    local yes = dle.onnx.exportable()
    local missing = {}
    for name in pairs(yes) do
      if not float_cases[name] and name ~= "cond" and name ~= "scan" and name ~= "while_loop" then
        missing[#missing + 1] = name
      end
    end
    table.sort(missing)
    assert.are.same({}, missing)
    local names = {}
    for name in pairs(float_cases) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local case = float_cases[name]
      local f = type(case) == "string" and function(x) return x[case](x) end or case
      local x, y = randn(4, 5), randn(4, 5)
      local ok, err = pcall(roundtrip, function(a, b) return f(a, b) end, {x, y}, {opset = 17})
      assert(ok, name .. ": " .. tostring(err))
      -- the trace holds the op the case is for
      local g = dle.graph.trace(function(a, b) return f(a, b) end, x, y)
      assert.is_true(H.count_ops(g, name) >= 1, name .. ": the case does not trace to the op")
    end
  end)

  it("lists every op that cannot be expressed in one error, naming the op and the reason", function()
    local ok, err = pcall(dle.onnx.save, dir .. "/bad.onnx", function(x)
      return x:cumprod(1) + dle.linalg.inv(x) + x:erfinv()
    end, {randn(3, 3)})
    assert.is_false(ok)
    assert.matches("dle.onnx.save: 3 op%(s%) cannot be expressed in ONNX opset 17", err)
    assert.matches("cumprod %(ONNX has CumSum only", err)
    assert.matches("linalg_inv", err)
    assert.matches("erfinv", err)
    assert.is_nil(io.open(dir .. "/bad.onnx"), "no file is left behind")
  end)

  it("refuses view_as_complex/view_as_real (a view that changes the dtype) instead of writing a Reshape", function()
    local ok, err = pcall(dle.onnx.save, dir .. "/vc.onnx", function(x)
      return dle.view_as_real(dle.view_as_complex(x)) * 2
    end, {randn(3, 2)})
    assert.is_false(ok)
    assert.matches("view %(view_as_real/view_as_complex: ONNX has no complex view%)", err)
    assert.is_nil(io.open(dir .. "/vc.onnx"), "no file is left behind")
  end)

  it("gives errors naming dle.onnx.save and the argument for bad options and inputs", function()
    local f = function(x) return x * 2 end
    local cases = {
      {{dir .. "/e.onnx", f, {randn(2)}, {opset = 12}},
       "dle.onnx.save: opset must be an integer from 13 to 17, got 12"},
      {{dir .. "/e.onnx", f, randn(2)}, "dle.onnx.save: example_inputs must be a list of tensors"},
      {{dir .. "/e.onnx", f, {1}}, "dle.onnx.save: example_inputs%[1%] must be a tensor, got number"},
      {{dir .. "/e.onnx", f, {randn(2)}, {input_names = {"a", "b"}}},
       "dle.onnx.save: input_names must be a list of 1 names, got 2 names"},
      {{dir .. "/e.onnx", f, {randn(2)}, {dynamic_axes = {nope = {[1] = "N"}}}},
       "dynamic_axes names 'nope', which is no input or output"},
      {{dir .. "/e.onnx", f, {randn(2)}, {dynamic_axes = {input = {[3] = "N"}}}},
       "dynamic_axes of 'input': dim 3 out of range for shape {2}"},
      {{dir .. "/e.onnx", 5, {randn(2)}}, "dle.onnx.save: argument #2"},
      {{dir .. "/no/such/dir/e.onnx", f, {randn(2)}}, "dle.onnx.save: cannot open"},
      {{dir .. "/e.onnx", f, {randn(2)}, {bogus = 1}}, "bogus"},
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(dle.onnx.save, table.unpack(c[1], 1, 4))
      assert.is_false(ok)
      assert.matches(c[2], err, 1, false)
    end
  end)

  it("writes an opset-13 model without opset-14+ ops and refuses Trilu there", function()
    local m = nn.Sequential(nn.Linear(5, 5), nn.LayerNorm(5))
    local path = roundtrip(m, {randn(3, 5)}, {opset = 13})
    for _, n in ipairs(dle.onnx.parse(path).graph.nodes) do assert.are_not.equal("LayerNormalization", n.op_type) end
    local ok, err = pcall(dle.onnx.save, dir .. "/t.onnx", function(x) return x:tril() end, {randn(3, 3)}, {opset = 13})
    assert.is_false(ok)
    assert.matches("tril %(Trilu needs opset 14%)", err)
  end)

  if have_onnx then
    it("has every file it wrote accepted by onnx.checker.check_model(full_check = True)", function()
      assert.is_true(#written >= 100, "only " .. #written .. " files")
      assert.are.equal("ok\n", onnx_check(written))
    end)
  else
    pending("onnx.checker on each file (python3-onnx is absent)")
  end
end)
