-- onnx_spec.lua — dle.onnx: the loader on models written by tests/onnx_writer.lua (inputs and
-- outputs, parameters, dynamic batch, opset-dependent semantics, tracing, malformed files), a model
-- built with python3-onnx's helper (skipped without it), and a fixed subset of ONNX 1.12's backend
-- tests from Debian's libonnx-testdata (skipped without it) through dle.onnx.conformance, the
-- runner of scripts/onnx-conformance.
local dle = require("dle")
local H = require("helpers")
local W = require("onnx_writer")
local C = require("dle.onnx.conformance")

local FLOAT = 1

-- x {N, 3} -> relu(x @ w) reshaped to {N, 2, 2}: a dynamic batch dim and a constant shape input.
local function mlp_model(w)
  return W.model{opset = 13,
    nodes = {W.node("MatMul", {"x", "w"}, {"h"}), W.node("Relu", {"h"}, {"r"}),
             W.node("Reshape", {"r", "shape"}, {"y"})},
    initializers = {W.tensor("w", w), W.tensor("shape", dle.tensor({0, -1, 2}, {dtype = "int64"}))},
    inputs = {W.value("x", FLOAT, {"N", 3})}, outputs = {W.value("y", FLOAT, {"N", 2, 2})}}
end

describe("dle.onnx.load", function()
  local w = dle.randn(3, 4, {generator = dle.Generator(1)})
  local function want(x) return x:matmul(w):relu():reshape(-1, 2, 2) end

  it("loads a model from its bytes and from a file, with input_names, output_names and opset", function()
    local bytes = mlp_model(w)
    local dir = H.tmpdir()
    H.write_file(dir .. "/m.onnx", bytes)
    for _, src in ipairs({bytes, dir .. "/m.onnx"}) do
      local m = dle.onnx.load(src)
      assert.are.same({"x"}, m.input_names)
      assert.are.same({"y"}, m.output_names)
      assert.are.equal(13, m.opset)
      local x = dle.randn(2, 3)
      assert.are.equal(0, H.max_diff(m(x), want(x)))
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("runs a dynamic batch dimension at two batch sizes, inputs positional or by name", function()
    local m = dle.onnx.load(mlp_model(w))
    for _, n in ipairs({1, 7}) do
      local x = dle.randn(n, 3)
      assert.are.same({n, 2, 2}, m(x):shape())
      assert.are.equal(0, H.max_diff(m{x = x}, want(x)))
    end
  end)

  it("makes float initializers trainable parameters (named as in the file) and keeps int ones constant", function()
    local m = dle.onnx.load(mlp_model(w))
    local names = {}
    for k in pairs(m:state_dict()) do names[#names + 1] = k end
    assert.are.same({"w"}, names)
    local x = dle.randn(4, 3)
    m(x):sum():backward()
    local ref = w:clone():requires_grad_(true)
    x:matmul(ref):relu():sum():backward()
    assert.are.equal(0, H.max_diff(m.w.grad, ref.grad))
    local frozen = dle.onnx.load(mlp_model(w), {requires_grad = false})
    assert.is_false(frozen.w.requires_grad)
  end)

  it("traces without an unsafe read (constant shape inputs are known at load time) and compiles", function()
    local m = dle.onnx.load(mlp_model(w))
    local x = dle.randn(2, 3)
    local g = dle.graph.trace(function(a) return m(a) end, x)
    assert.is_nil(g.unsafe)
    assert.are.equal(0, H.max_diff(g:run(x), want(x)))
    local f = dle.compile(function(a) return m(a) end)
    assert.are.equal(0, H.max_diff(f(x), want(x)))
  end)

  it("returns every graph output, in order", function()
    local m = dle.onnx.load(W.model{opset = 13,
      nodes = {W.node("Split", {"x", "sizes"}, {"a", "b"}, {axis = W.int(1)})},
      initializers = {W.tensor("sizes", dle.tensor({1, 2}, {dtype = "int64"}))},
      inputs = {W.value("x", FLOAT, {2, 3})}, outputs = {W.value("a", FLOAT, {2, 1}), W.value("b", FLOAT, {2, 2})}})
    local x = dle.arange(0, 6):reshape(2, 3)
    local a, b = m(x)
    assert.are.same({{0}, {3}}, a:totable())
    assert.are.same({{1, 2}, {4, 5}}, b:totable())
  end)

  it("applies Softmax's opset semantics: flattened trailing dims before opset 13, one axis after", function()
    local x = dle.randn(2, 3, 4)
    local function softmax_at(opset)
      return dle.onnx.load(W.model{opset = opset, nodes = {W.node("Softmax", {"x"}, {"y"}, {axis = W.int(1)})},
        inputs = {W.value("x", FLOAT, {2, 3, 4})}, outputs = {W.value("y", FLOAT, {2, 3, 4})}})(x)
    end
    assert.is_true(H.max_diff(softmax_at(11), x:reshape(2, 12):softmax(2):reshape(2, 3, 4)) < 1e-6)
    assert.is_true(H.max_diff(softmax_at(13), x:softmax(2)) < 1e-6)
  end)

  it("uses ONNX's attribute defaults (Gemm alpha/beta 1, LeakyRelu alpha 0.01) and given values", function()
    local a, b, c = dle.randn(2, 3), dle.randn(4, 3), dle.randn(4)
    local m = dle.onnx.load(W.model{opset = 13,
      nodes = {W.node("Gemm", {"a", "b", "c"}, {"g"}, {transB = W.int(1), beta = W.float(0.5)}),
               W.node("LeakyRelu", {"g"}, {"y"})},
      inputs = {W.value("a", FLOAT, {2, 3}), W.value("b", FLOAT, {4, 3}), W.value("c", FLOAT, {4})},
      outputs = {W.value("y", FLOAT, {2, 4})}})
    local g = a:matmul(b:t()) + c * 0.5
    assert.is_true(H.max_diff(m(a, b, c), dle.where(g:lt(0), g * 0.01, g)) < 1e-6)
  end)

  it("maps DFT (opset 17) onto dle.fft: real and complex inputs, inverse, onesided, dft_length, errors", function()
    -- a direct DFT of a {B, N, 1|2} signal along dim 2, to n points, as a {B, n, 2} table
    local function dft(x, n, sign, scale)
      local out, v = {}, x:totable()
      for b = 1, x:size(1) do
        out[b] = {}
        for k = 0, n - 1 do
          local re, im = 0, 0
          for t = 0, math.min(n, x:size(2)) - 1 do
            local a, c = v[b][t + 1][1], v[b][t + 1][2] or 0
            local ang = sign * 2 * math.pi * k * t / n
            re, im = re + a * math.cos(ang) - c * math.sin(ang), im + a * math.sin(ang) + c * math.cos(ang)
          end
          out[b][k + 1] = {re * scale, im * scale}
        end
      end
      return out
    end
    local function run(x, attrs, n)
      local ins, vals = {"x"}, {W.value("x", FLOAT, x:shape())}
      if n then ins[2] = "n"; vals[2] = W.value("n", 7, {}) end -- int64
      local m = dle.onnx.load(W.model{opset = 17, nodes = {W.node("DFT", ins, {"y"}, attrs)}, inputs = vals,
        outputs = {W.value("y", FLOAT, nil)}})
      return n and m(x, dle.tensor(n, {dtype = "int64"})) or m(x)
    end
    local real, cplx = dle.randn(2, 5, 1), dle.randn(2, 5, 2)
    local function near(got, expect) return H.max_diff(got, dle.tensor(expect)) < 1e-4 end
    assert.is_true(near(run(real, {axis = W.int(1)}), dft(real, 5, -1, 1)))
    assert.is_true(near(run(cplx, {axis = W.int(1)}), dft(cplx, 5, -1, 1)))
    assert.is_true(near(run(cplx, {axis = W.int(1), inverse = W.int(1)}), dft(cplx, 5, 1, 1 / 5)))
    assert.is_true(near(run(real, {axis = W.int(1)}, 7), dft(real, 7, -1, 1)))
    local half = run(real, {axis = W.int(1), onesided = W.int(1)})
    assert.are.same({2, 3, 2}, half:shape())
    assert.is_true(near(half, dle.tensor(dft(real, 5, -1, 1)):narrow(2, 1, 3):totable()))
    assert.has_error(function() run(real, {axis = W.int(2)}) end, nil)
    local ok, err = pcall(run, dle.randn(2, 5, 3), {axis = W.int(1)})
    assert.is_false(ok)
    assert.truthy(tostring(err):find("1 (real) or 2 (real, imaginary)", 1, true), tostring(err))
  end)

  it("keeps dle.onnx.missing (ops dle cannot express) apart from the mapped ops", function()
    for _, op in ipairs(dle.onnx.missing) do assert.is_nil(dle.onnx.ops[op], op) end
    for _, op in ipairs({"Conv", "LSTM", "Resize", "Softmax", "ReduceSum", "Gather"}) do
      assert.is_function(dle.onnx.ops[op], op)
    end
  end)

  it("lists every unsupported op with its node name in one load-time error", function()
    local err = H.assert_error(function()
      dle.onnx.load(W.model{nodes = {W.node("Foo", {"x"}, {"y"}, nil, "first"), W.node("Relu", {"y"}, {"z"}),
                                     W.node("NonMaxSuppression", {"z"}, {"q"}, nil, "second")}})
    end, "dle.onnx.load: (bytes): unsupported ONNX ops at opset 13", "Foo (node 'first')",
       "NonMaxSuppression (node 'second')")
    assert.is_nil(err:find("Relu", 1, true))
  end)

  it("rejects wrong inputs with errors naming the input and the shapes", function()
    local m = dle.onnx.load(mlp_model(w))
    H.assert_error(function() m(dle.randn(2, 3, 1)) end, "input 'x' must have 2 dims, got shape {2,3,1}")
    H.assert_error(function() m{z = dle.randn(2, 3)} end, "unknown input 'z' (inputs: x)")
    H.assert_error(function() m() end, "expected 1 inputs (x), got 0")
    H.assert_error(function() dle.onnx.load(mlp_model(w), {bogus = 1}) end, "dle.onnx.load: unknown option 'bogus'")
  end)

  it("names the node and the op's own message when an op fails while running", function()
    local m = dle.onnx.load(W.model{nodes = {W.node("Add", {"x", "y"}, {"z"}, nil, "adder")},
      inputs = {W.value("x", FLOAT, {2, 3}), W.value("y", FLOAT, {2, 3})}, outputs = {W.value("z", FLOAT, {2, 3})}})
    H.assert_error(function() m(dle.randn(2, 3), dle.randn(2, 4)) end,
                   "dle.onnx model (bytes): node 'adder' (Add): add: shapes {2,3} and {2,4} cannot be broadcast")
  end)

  it("gives clean errors naming the file for malformed files and tensors", function()
    local function init_model(t) return W.model{nodes = {}, initializers = {W.raw_tensor(t)}} end
    local cases = {
      {mlp_model(w):sub(1, 40), "not a valid ONNX ModelProto"},
      {"\8\255\255\255", "not a valid ONNX ModelProto"},
      {init_model{name = "t", dims = {2, 3}, data_type = 1, raw = ("\0"):rep(20)},
       "tensor 't': raw_data has 20 bytes, shape {2,3} of FLOAT needs 24"},
      {init_model{name = "t", dims = {2, -3}, data_type = 1, raw = ""}, "tensor 't': dim 2 is negative (-3)"},
      {init_model{name = "t", dims = {2}, data_type = 99, raw = "12345678"},
       "tensor 't': unsupported data type unknown (99)"},
      {init_model{name = "t", dims = {2}, data_type = 8, raw = "12"}, "tensor 't': unsupported data type STRING (8)"},
      {init_model{name = "t", dims = {3}, data_type = 1, float_data = {1, 2}},
       "tensor 't': 2 values for shape {3} (FLOAT)"},
      {init_model{name = "t", dims = {1 << 40, 1 << 40}, data_type = 1, raw = ""}, "tensor 't': too many elements"},
    }
    for _, c in ipairs(cases) do
      H.assert_error(function() dle.onnx.load(c[1]) end, "dle.onnx.load: (bytes): ", c[2])
    end
    local dir = H.tmpdir()
    H.write_file(dir .. "/bad.onnx", cases[1][1])
    H.assert_error(function() dle.onnx.load(dir .. "/bad.onnx") end,
                   "dle.onnx.load: " .. dir .. "/bad.onnx: not a valid")
    H.assert_error(function() dle.onnx.load(dir .. "/absent.onnx") end,
                   "dle.onnx.load: " .. dir .. "/absent.onnx: cannot open the file")
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("reads TensorProtos of every dle dtype, raw or typed, as tensors with their names", function()
    for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8", "bool"}) do
      local t = dle.tensor({{1, 0, 3}, {4, 5, 0}}):to(dt)
      local got, name = dle.onnx.load_tensor(W.tensor("v", t), true)
      assert.are.equal(dt, got:dtype())
      assert.are.equal("v", name)
      assert.are.same(t:totable(), got:totable())
    end
    local got = dle.onnx.load_tensor(W.raw_tensor{dims = {2}, data_type = 1, float_data = {1.5, -2}}, true)
    assert.are.same({1.5, -2}, got:totable())
    -- no data at all: an empty tensor (its typed field is absent)
    for _, ty in ipairs({1, 7, 9, 11}) do
      assert.are.same({0, 3}, dle.onnx.load_tensor(W.raw_tensor{dims = {0, 3}, data_type = ty}, true):shape())
    end
  end)
end)

-- Sequence and optional values, Unique and ScatterND's reductions on hand-built models.
local INT64 = 7
local SEQ_F = W.sequence_type(W.tensor_type(FLOAT))
local function i64(v) return dle.tensor(v, {dtype = "int64"}) end
local function seq_model(m)
  m.opset = m.opset or 17
  return dle.onnx.load(W.model(m))
end
-- the values of a list of tensors, as Lua tables
local function tables(list)
  local out = {}
  for i, t in ipairs(list) do out[i] = t:totable() end
  return out
end

describe("dle.onnx sequences and optionals", function()
  it("builds and edits sequences: SequenceConstruct, SequenceInsert (front, end), SequenceErase, SequenceAt, "
     .. "SequenceLength", function()
    local m = seq_model{
      nodes = {W.node("SequenceConstruct", {"a", "b"}, {"s"}),
               W.node("SequenceInsert", {"s", "c", "zero"}, {"s2"}),        -- at the front
               W.node("SequenceInsert", {"s2", "a"}, {"s3"}),               -- at the end
               W.node("SequenceErase", {"s3", "minus2"}, {"s4"}),           -- b, the last but one
               W.node("SequenceLength", {"s4"}, {"n"}),
               W.node("SequenceAt", {"s4", "minus1"}, {"last"})},
      initializers = {W.tensor("zero", i64(0)), W.tensor("minus1", i64(-1)), W.tensor("minus2", i64(-2))},
      inputs = {W.value("a", FLOAT, {2}), W.value("b", FLOAT, {2}), W.value("c", FLOAT, {2})},
      outputs = {W.value("s4", SEQ_F), W.value("n", INT64, {}), W.value("last", FLOAT, {2})}}
    local a, b, c = dle.tensor({1, 2}), dle.tensor({3, 4}), dle.tensor({5, 6})
    local s, n, last = m(a, b, c)
    assert.are.same({{5, 6}, {1, 2}, {1, 2}}, tables(s))
    assert.are.equal(3, n:item())
    assert.are.same({1, 2}, last:totable())
  end)

  it("takes a sequence input as a Lua list (positionally or by name) and concatenates or stacks it", function()
    local m = seq_model{
      nodes = {W.node("ConcatFromSequence", {"s"}, {"cat"}, {axis = W.int(1)}),
               W.node("ConcatFromSequence", {"s"}, {"stacked"}, {axis = W.int(-1), new_axis = W.int(1)})},
      inputs = {W.value("s", SEQ_F)},
      outputs = {W.value("cat", FLOAT, {2, 4}), W.value("stacked", FLOAT, {2, 2, 2})}}
    local x, y = dle.tensor({{1, 2}, {3, 4}}), dle.tensor({{5, 6}, {7, 8}})
    for _, call in ipairs({function() return m({x, y}) end, function() return m{s = {x, y}} end}) do
      local cat, stacked = call()
      assert.are.same({{1, 2, 5, 6}, {3, 4, 7, 8}}, cat:totable())
      assert.are.same({{{1, 5}, {2, 6}}, {{3, 7}, {4, 8}}}, stacked:totable())
    end
  end)

  it("traces a model with sequences inside (constant positions are known at load time) and replays it", function()
    local m = seq_model{
      nodes = {W.node("SequenceConstruct", {"a", "b"}, {"s"}), W.node("SequenceInsert", {"s", "b", "zero"}, {"s2"}),
               W.node("ConcatFromSequence", {"s2"}, {"y"}, {axis = W.int(0)})},
      initializers = {W.tensor("zero", i64(0))},
      inputs = {W.value("a", FLOAT, {2}), W.value("b", FLOAT, {2})}, outputs = {W.value("y", FLOAT, {6})}}
    local g = dle.graph.trace(function(a, b) return m(a, b) end, dle.tensor({1, 2}), dle.tensor({3, 4}))
    assert.is_nil(g.unsafe)
    assert.are.same({7, 8, 5, 6, 7, 8}, g:run(dle.tensor({5, 6}), dle.tensor({7, 8})):totable())
  end)

  it("splits a tensor into a sequence: pieces of a scalar size (the last smaller), given sizes, or 1 without "
     .. "the axis", function()
    local m = seq_model{
      nodes = {W.node("SplitToSequence", {"x", "two"}, {"by2"}, {axis = W.int(1)}),
               W.node("SplitToSequence", {"x", "sizes"}, {"bysizes"}, {axis = W.int(1)}),
               W.node("SplitToSequence", {"x"}, {"rows"}, {keepdims = W.int(0)})},
      initializers = {W.tensor("two", i64(2)), W.tensor("sizes", i64({1, 4}))},
      inputs = {W.value("x", FLOAT, {2, 5})},
      outputs = {W.value("by2", SEQ_F), W.value("bysizes", SEQ_F), W.value("rows", SEQ_F)}}
    local x = dle.arange(0, 10):reshape(2, 5)
    local by2, bysizes, rows = m(x)
    assert.are.same({{{0, 1}, {5, 6}}, {{2, 3}, {7, 8}}, {{4}, {9}}}, tables(by2))
    assert.are.same({{{0}, {5}}, {{1, 2, 3, 4}, {6, 7, 8, 9}}}, tables(bysizes))
    assert.are.same({{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}}, tables(rows))
  end)

  it("runs SequenceMap's body once per element, a tensor input given to every run", function()
    local body = W.graph_attr{nodes = {W.node("Add", {"xi", "t"}, {"yi"}), W.node("Shape", {"xi"}, {"si"})},
      inputs = {W.value("xi", FLOAT, {"n"}), W.value("t", FLOAT, {1})},
      outputs = {W.value("yi", FLOAT, {"n"}), W.value("si", INT64, {1})}}
    local m = seq_model{
      nodes = {W.node("SequenceMap", {"s", "t"}, {"ys", "shapes"}, {body = body})},
      inputs = {W.value("s", SEQ_F), W.value("t", FLOAT, {1})},
      outputs = {W.value("ys", SEQ_F), W.value("shapes", W.sequence_type(W.tensor_type(INT64)))}}
    local ys, shapes = m({dle.tensor({1, 2, 3}), dle.tensor({10})}, dle.tensor({0.5}))
    assert.are.same({{1.5, 2.5, 3.5}, {10.5}}, tables(ys))
    assert.are.same({{3}, {1}}, tables(shapes))
    local empty = m({}, dle.tensor({0.5}))
    assert.are.same({}, empty)
  end)

  -- Loop(M, cond, s): each iteration appends x[1 .. i + 1] to the sequence and scans i * 2.
  local function growing_loop()
    local body = W.graph_attr{
      nodes = {W.node("Identity", {"c_in"}, {"c_out"}),
               W.node("Add", {"i", "one"}, {"end1"}),
               W.node("Slice", {"x", "start", "end1"}, {"piece"}),
               W.node("SequenceInsert", {"s_in", "piece"}, {"s_out"}),
               W.node("Add", {"i", "i"}, {"twice"})},
      inputs = {W.value("i", INT64, {}), W.value("c_in", 9, {}), W.value("s_in", SEQ_F)},
      outputs = {W.value("c_out", 9, {}), W.value("s_out", SEQ_F), W.value("twice", INT64, {})}}
    return seq_model{
      nodes = {W.node("SequenceEmpty", {}, {"s0"}), W.node("Loop", {"m", "", "s0"}, {"s", "scanned"}, {body = body})},
      initializers = {W.tensor("x", dle.tensor({1, 2, 3, 4})), W.tensor("one", i64({1})),
                      W.tensor("start", i64({0}))},
      inputs = {W.value("m", INT64, {})},
      outputs = {W.value("s", SEQ_F), W.value("scanned", INT64, {"k"})}}
  end

  it("runs a Loop carrying a sequence and with a scan output (as a Lua loop), for 3 and for 0 iterations", function()
    local m = growing_loop()
    local s, scanned = m(i64(3))
    assert.are.same({{1}, {1, 2}, {1, 2, 3}}, tables(s))
    assert.are.same({0, 2, 4}, scanned:totable())
    s, scanned = m(i64(0))
    assert.are.same({}, s)
    assert.are.same({0}, scanned:shape())
  end)

  it("runs an If whose branches give sequences by its condition", function()
    local function branch(v)
      local k = W.tensor_attr(W.tensor("k", dle.tensor({v})))
      return W.graph_attr{nodes = {W.node("Constant", {}, {"k"}, {value = k}),
                                   W.node("SequenceConstruct", {"k", "k"}, {"out"})},
                          outputs = {W.value("out", SEQ_F)}}
    end
    local m = seq_model{nodes = {W.node("If", {"c"}, {"r"}, {then_branch = branch(1), else_branch = branch(2)})},
      inputs = {W.value("c", 9, {})}, outputs = {W.value("r", SEQ_F)}}
    assert.are.same({{1}, {1}}, tables(m(dle.tensor(true))))
    assert.are.same({{2}, {2}}, tables(m(dle.tensor(false))))
  end)

  it("holds optionals: Optional of a value or of nothing, OptionalHasElement, OptionalGetElement; nil is the "
     .. "empty one", function()
    local OPT = W.optional_type(W.tensor_type(FLOAT))
    local m = seq_model{
      nodes = {W.node("Optional", {"x"}, {"full"}), W.node("Optional", {}, {"empty"}),
               W.node("OptionalHasElement", {"full"}, {"has_full"}),
               W.node("OptionalHasElement", {"empty"}, {"has_empty"}),
               W.node("OptionalHasElement", {"o"}, {"has_o"}), W.node("OptionalGetElement", {"full"}, {"got"})},
      inputs = {W.value("x", FLOAT, {2}), W.value("o", W.optional_type(SEQ_F))},
      outputs = {W.value("empty", OPT), W.value("has_full", 9, {}), W.value("has_empty", 9, {}),
                 W.value("has_o", 9, {}), W.value("got", FLOAT, {2})}}
    local x = dle.tensor({1, 2})
    local empty, has_full, has_empty, has_o, got = m(x, {x})
    assert.is_nil(empty)
    assert.is_true(has_full:item())
    assert.is_false(has_empty:item())
    assert.is_true(has_o:item())
    assert.are.same({1, 2}, got:totable())
    local _, _, _, has_none = m(x, nil)
    assert.is_false(has_none:item())
  end)

  it("rejects bad sequence values with errors naming the node: positions out of range, a tensor for a sequence, "
     .. "mixed dtypes, an empty optional read", function()
    local s_in = {W.value("s", SEQ_F)}
    local list = {dle.tensor({1}), dle.tensor({2})}
    -- runs a model of one node (named "n") on the given input value; expects the error `msg`
    local function bad(op, ins, attrs, inits, inputs, value, msg)
      local m = seq_model{nodes = {W.node(op, ins, {"y"}, attrs, "n")}, initializers = inits, inputs = inputs or s_in,
                          outputs = {W.value("y", FLOAT, {})}}
      H.assert_error(function() m(value) end, msg)
    end
    local p2, pm3, p0 = {W.tensor("p", i64(2))}, {W.tensor("p", i64(-3))}, {W.tensor("p", i64(0))}
    bad("SequenceAt", {"s", "p"}, nil, p2, nil, list,
        "node 'n' (SequenceAt): position 2 is out of range for a sequence of length 2 (-2 to 1)")
    bad("SequenceAt", {"s", "p"}, nil, pm3, nil, list, "node 'n' (SequenceAt): position -3 is out of range")
    bad("SequenceInsert", {"s", "s", "p"}, nil, p0, nil, list,
        "node 'n' (SequenceInsert): tensor must be a tensor, got sequence of 2")
    bad("SequenceInsert", {"s", "p"}, nil, p0, nil, list,
        "node 'n' (SequenceInsert): tensor of dtype int64 in a sequence of float32")
    bad("SequenceInsert", {"s", "v", "p"}, nil, {W.tensor("v", dle.tensor({3})), W.tensor("p", dle.tensor(0.5))}, nil,
        list, "node 'n' (SequenceInsert): position must be one integer, got tensor float32 {}")
    bad("SequenceErase", {"s"}, nil, nil, nil, {}, "node 'n' (SequenceErase): cannot erase from an empty sequence")
    bad("SequenceLength", {"x"}, nil, nil, {W.value("x", FLOAT, {1})}, dle.tensor({1}),
        "node 'n' (SequenceLength): input must be a sequence, got tensor float32 {1}")
    bad("ConcatFromSequence", {"s"}, {axis = W.int(3)}, nil, nil, list,
        "node 'n' (ConcatFromSequence): axis 3 out of range for rank 1")
    bad("ConcatFromSequence", {"s"}, {axis = W.int(0), new_axis = W.int(1)}, nil, nil,
        {dle.tensor({1, 2}), dle.tensor({3})},
        "node 'n' (ConcatFromSequence): stack: input 2 has shape {1} but input 1 has shape {2}")
    bad("SplitToSequence", {"x", "sizes"}, nil, {W.tensor("sizes", i64({1, 1}))}, {W.value("x", FLOAT, {3})},
        dle.tensor({1, 2, 3}),
        "node 'n' (SplitToSequence): split sizes add up to 2, but dim 1 of input tensor float32 {3} has 3")
    bad("OptionalGetElement", {"o"}, nil, nil, {W.value("o", W.optional_type(W.tensor_type(FLOAT)))}, nil,
        "node 'n' (OptionalGetElement): the optional is empty")
    -- the model's own input checks
    local seq_msg = "input 's' must be a list of tensors of one dtype (an ONNX sequence), got "
    bad("Identity", {"s"}, nil, nil, nil, {dle.tensor({1}), dle.tensor({2}, {dtype = "int64"})},
        "dle.onnx model (bytes): " .. seq_msg .. "tensors of dtypes float32 and int64")
    bad("Identity", {"s"}, nil, nil, nil, dle.tensor({1}), seq_msg .. "tensor float32 {1}")
    bad("Identity", {"s"}, nil, nil, nil, {dle.tensor({1}), 2}, seq_msg .. "a table with number at [2]")
  end)

  it("reads SequenceProto and OptionalProto messages (bytes or files) with their names", function()
    local a, b = dle.tensor({1, 2}), dle.tensor({{3}}, {dtype = "int64"})
    local list, name = dle.onnx.load_sequence(W.sequence("s", {W.tensor("", a), W.tensor("", b)}), true)
    assert.are.equal("s", name)
    assert.are.same({{1, 2}, {{3}}}, tables(list))
    assert.are.equal("int64", list[2]:dtype())
    assert.are.same({}, (dle.onnx.load_sequence(W.sequence("e", {}), true)))
    local v, kind = dle.onnx.load_optional(W.optional("o", "tensor", W.tensor("", a)), true)
    assert.are.equal("tensor", kind)
    assert.are.same({1, 2}, v:totable())
    v, kind = dle.onnx.load_optional(W.optional("o", "sequence", W.sequence("", {W.tensor("", a)})), true)
    assert.are.equal("sequence", kind)
    assert.are.same({{1, 2}}, tables(v))
    v, kind, name = dle.onnx.load_optional(W.optional("none"), true)
    assert.are.equal("none", kind)
    assert.is_nil(v)
    assert.are.equal("none", name)
    H.assert_error(function() dle.onnx.load_sequence("\8\255\255\255", true) end,
                   "dle.onnx.load_sequence: (bytes): not a valid ONNX SequenceProto")
    local short = W.raw_tensor{name = "t", dims = {2}, data_type = 1, raw = "x"}
    H.assert_error(function() dle.onnx.load_sequence(W.sequence("s", {short}), true) end,
                   "dle.onnx.load_sequence: (bytes): tensor 't': raw_data has 1 bytes")
    local nested = W.bytes_field(1, "n") .. W.bytes_field(5, W.sequence("", {}))
    H.assert_error(function() dle.onnx.load_sequence(nested, true) end,
                   "dle.onnx.load_sequence: (bytes): sequence 'n': only sequences of tensors are supported")
    local dir = H.tmpdir()
    H.write_file(dir .. "/s.pb", W.sequence("s", {W.tensor("", a)}))
    assert.are.same({{1, 2}}, tables(dle.onnx.load_sequence(dir .. "/s.pb")))
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

describe("dle.onnx Unique and ScatterND reductions", function()
  local function unique(x, attrs)
    local m = seq_model{opset = 11, nodes = {W.node("Unique", {"x"}, {"y", "indices", "inverse", "counts"}, attrs)},
      inputs = {W.value("x", FLOAT, x:shape())},
      outputs = {W.value("y", FLOAT, {}), W.value("indices", INT64, {}), W.value("inverse", INT64, {}),
                 W.value("counts", INT64, {})}}
    local y, indices, inverse, counts = m(x)
    return {y:totable(), indices:totable(), inverse:totable(), counts:totable()}
  end

  it("gives Unique's values, first indices, inverse indices and counts, sorted or in first-occurrence order", function()
    local x = dle.tensor({2, 1, 1, 3, 4, 3})
    assert.are.same({{1, 2, 3, 4}, {1, 0, 3, 4}, {1, 0, 0, 2, 3, 2}, {2, 1, 2, 1}}, unique(x))
    assert.are.same({{2, 1, 3, 4}, {0, 1, 3, 4}, {0, 1, 1, 2, 3, 2}, {1, 2, 2, 1}}, unique(x, {sorted = W.int(0)}))
    -- a 2-D input without axis is flattened
    assert.are.same({{1, 2}, {1, 0}, {1, 0, 0, 1}, {2, 2}}, unique(dle.tensor({{2, 1}, {1, 2}})))
  end)

  it("gives Unique of slices along an axis (negative too), sorted lexicographically or by first occurrence", function()
    local x = dle.tensor({{3, 1, 3, 1}, {5, 2, 5, 2}})
    assert.are.same({{{1, 3}, {2, 5}}, {1, 0}, {1, 0, 1, 0}, {2, 2}}, unique(x, {axis = W.int(1)}))
    assert.are.same({{{1, 3}, {2, 5}}, {1, 0}, {1, 0, 1, 0}, {2, 2}}, unique(x, {axis = W.int(-1)}))
    assert.are.same({{{3, 1}, {5, 2}}, {0, 1}, {0, 1, 0, 1}, {2, 2}}, unique(x, {axis = W.int(1), sorted = W.int(0)}))
    local rows = dle.tensor({{2, 3}, {1, 0}, {2, 3}})
    assert.are.same({{{2, 3}, {1, 0}}, {0, 1}, {0, 1, 0}, {2, 1}}, unique(rows, {axis = W.int(0), sorted = W.int(0)}))
    H.assert_error(function() unique(x, {axis = W.int(2)}) end, "(Unique): axis 2 out of range for rank 2")
  end)

  it("applies ScatterND's mul, max and min reductions with data's own values, repeated indices combining", function()
    local function scatter(reduction, data, idx, upd)
      local m = seq_model{opset = 18,
        nodes = {W.node("ScatterND", {"x", "i", "u"}, {"y"}, {reduction = W.str(reduction)})},
        inputs = {W.value("x", FLOAT, data:shape()), W.value("i", INT64, idx:shape()),
                  W.value("u", FLOAT, upd:shape())},
        outputs = {W.value("y", FLOAT, data:shape())}}
      return m(data, idx, upd):totable()
    end
    local data, idx, upd = dle.tensor({1, 2, 3, 4}), i64({{1}, {1}, {3}}), dle.tensor({5, 2, 0.5})
    assert.are.same({1, 20, 3, 2}, scatter("mul", data, idx, upd))
    assert.are.same({1, 5, 3, 4}, scatter("max", data, idx, upd))
    assert.are.same({1, 2, 3, 0.5}, scatter("min", data, idx, upd))
    -- index tuples addressing rows of a 2-D data (negative indices from the end)
    local rows = dle.tensor({{1, 2}, {3, 4}, {5, 6}})
    assert.are.same({{10, -20}, {3, 4}, {5, 6}},
                    scatter("mul", rows, i64({{0}, {-3}}), dle.tensor({{2, -2}, {5, 5}})))
    assert.are.same({{1, 2}, {3, 4}, {0, 6}},
                    scatter("min", rows, i64({{2, 0}}), dle.tensor({0})))
    H.assert_error(function() scatter("avg", data, idx, upd) end, "(ScatterND): reduction 'avg' is not supported")
  end)
end)

describe("dle.onnx Scan of opset 8 (a batch dim and sequence_lens)", function()
  -- Scan-8(sequence_lens, s {B, 2}, x {B, T, 2}): the body adds each slice to the state and
  -- scans the running sum, so ys are per-row cumulative sums and s the last of them.
  local function scan8(lens_name, attrs)
    local body = W.graph_attr{
      nodes = {W.node("Add", {"s_in", "x_in"}, {"s_out"}), W.node("Identity", {"s_out"}, {"y_out"})},
      inputs = {W.value("s_in", FLOAT, {2}), W.value("x_in", FLOAT, {2})},
      outputs = {W.value("s_out", FLOAT, {2}), W.value("y_out", FLOAT, {2})}}
    attrs = attrs or {}
    attrs.body, attrs.num_scan_inputs = body, W.int(1)
    local inputs = {W.value("s", FLOAT, {"B", 2}), W.value("x", FLOAT, {"B", "T", 2})}
    if lens_name ~= "" then table.insert(inputs, 1, W.value(lens_name, INT64, {"B"})) end
    return seq_model{opset = 8, nodes = {W.node("Scan", {lens_name, "s", "x"}, {"s_final", "ys"}, attrs)},
      inputs = inputs, outputs = {W.value("s_final", FLOAT, {"B", 2}), W.value("ys", FLOAT, {"B", "T", 2})}}
  end
  local s0 = dle.tensor({{0, 0}, {10, 20}, {1, 1}})
  local x = dle.tensor({{{1, 2}, {3, 4}, {5, 6}}, {{1, 1}, {2, 2}, {3, 3}}, {{7, 7}, {8, 8}, {9, 9}}})

  it("scans every batch row over all its steps when sequence_lens is absent", function()
    local s, ys = scan8("")(s0, x)
    assert.are.same({{9, 12}, {16, 26}, {25, 25}}, s:totable())
    assert.are.same({{{1, 2}, {4, 6}, {9, 12}}, {{11, 21}, {13, 23}, {16, 26}}, {{8, 8}, {16, 16}, {25, 25}}},
                    ys:totable())
  end)

  it("stops each row at its sequence_lens (zeros past it; a row of length 0 keeps its state)", function()
    local s, ys = scan8("lens")(i64({2, 0, 1}), s0, x)
    assert.are.same({{4, 6}, {10, 20}, {8, 8}}, s:totable())
    assert.are.same({{{1, 2}, {4, 6}, {0, 0}}, {{0, 0}, {0, 0}, {0, 0}}, {{8, 8}, {0, 0}, {0, 0}}}, ys:totable())
  end)

  it("scans an input whose directions flag is 1 backwards over the row's first sequence_lens steps", function()
    local s, ys = scan8("lens", {directions = W.ints({1})})(i64({3, 2, 1}), s0, x)
    assert.are.same({{9, 12}, {13, 23}, {8, 8}}, s:totable())
    assert.are.same({{{5, 6}, {8, 10}, {9, 12}}, {{12, 22}, {13, 23}, {0, 0}}, {{8, 8}, {0, 0}, {0, 0}}},
                    ys:totable())
  end)

  it("runs each batch row as a dle.scan graph node when traced", function()
    local m = scan8("")
    local g = dle.graph.trace(function(a, b) return m(a, b) end, s0, x)
    local scans = 0
    for _, n in ipairs(g:nodes()) do if n.op == "scan" then scans = scans + 1 end end
    assert.are.equal(3, scans)
  end)

  it("rejects sequence_lens out of range and inputs whose batch dims differ, naming the node", function()
    H.assert_error(function() scan8("lens")(i64({4, 0, 1}), s0, x) end,
                   "(Scan): sequence_lens[1] = 4 is outside [0, 3]")
    H.assert_error(function() scan8("lens")(i64({1, 1}), s0, x) end,
                   "(Scan): sequence_lens must have 3 elements (the batch)")
    H.assert_error(function() scan8("")(s0:narrow(1, 1, 2), x) end,
                   "(Scan): input 3 must be a tensor with a batch dim and a sequence dim matching the others, got")
    H.assert_error(function() scan8("lens")(i64({0, 0, 0}), s0, x) end,
                   "(Scan): every sequence_lens is 0")
  end)
end)

describe("dle.onnx with python3-onnx", function()
  local have = os.execute("/usr/bin/python3 -c 'import onnx' >/dev/null 2>&1")
  local function it_onnx(name, fn)
    if have then it(name, fn) else pending(name .. " (python3-onnx is absent)") end
  end

  it_onnx("runs a model built by onnx.helper with a dynamic batch at two batch sizes", function()
    local dir = H.tmpdir()
    H.run_python({
      "import numpy as np, onnx",
      "from onnx import helper, numpy_helper, TensorProto",
      "w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, 'w')",
      "b = numpy_helper.from_array(np.array([0.5, -1, 2], dtype=np.float32), 'b')",
      "nodes = [helper.make_node('Gemm', ['x', 'w', 'b'], ['h'], name='fc'),",
      "         helper.make_node('Sigmoid', ['h'], ['y'], name='act')]",
      "g = helper.make_graph(nodes, 'g', [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['batch', 4])],",
      "    [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['batch', 3])], [w, b])",
      "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])",
      "onnx.checker.check_model(m)",
      "onnx.save(m, '" .. dir .. "/m.onnx')",
    })
    local m = dle.onnx.load(dir .. "/m.onnx")
    local w = dle.arange(0, 12):reshape(4, 3) / 10
    for _, n in ipairs({2, 5}) do
      local x = dle.randn(n, 4)
      assert.is_true(H.max_diff(m(x), (x:matmul(w) + dle.tensor({0.5, -1, 2})):sigmoid()) < 1e-6)
    end
    os.execute("rm -rf '" .. dir .. "'")
  end)
end)

-- A fixed subset of ONNX's backend node tests (opset-dependent attributes and inputs, broadcasting,
-- every op family) and one model of the "simple" suite; scripts/onnx-conformance runs them all.
local SUBSET = {
  "test_add_bcast", "test_sub_bcast", "test_mul_bcast", "test_div_bcast", "test_pow_bcast_array",
  "test_matmul_4d", "test_gemm_all_attributes", "test_conv_with_strides_and_asymmetric_padding",
  "test_conv_with_autopad_same", "test_maxpool_2d_same_upper", "test_maxpool_2d_ceil",
  "test_maxpool_3d_default", "test_averagepool_2d_pads", "test_averagepool_2d_same_lower",
  "test_globalaveragepool", "test_batchnorm_example", "test_batchnorm_epsilon_training_mode",
  "test_layer_normalization_3d_axis1_epsilon", "test_softmax_axis_1", "test_logsoftmax_axis_0",
  "test_reduce_sum_keepdims_example", "test_reduce_mean_do_not_keepdims_example",
  "test_reduce_log_sum_exp_keepdims_random", "test_argmax_keepdims_example_select_last_index",
  "test_reshape_reordered_all_dims", "test_transpose_all_permutations_3", "test_flatten_axis2",
  "test_squeeze_negative_axes", "test_unsqueeze_three_axes", "test_concat_3d_axis_negative_2",
  "test_slice_neg_steps", "test_gather_negative_indices", "test_split_variable_parts_2d",
  "test_expand_dim_changed", "test_shape_start_1_end_negative_1", "test_cast_FLOAT_to_DOUBLE",
  "test_constantofshape_int_zeros", "test_where_long_example", "test_equal_bcast",
  "test_clip_default_inbounds", "test_leakyrelu_default", "test_selu", "test_hardswish", "test_tile",
  "test_reflect_pad", "test_nllloss_NCd1d2_with_weight", "test_sce_mean_weight_ii_3d",
  "test_resize_upsample_scales_cubic",
  "test_resize_tf_crop_and_resize", "test_gathernd_example_int32_batch_dim1", "test_lstm_with_peepholes",
  "test_gru_with_initial_bias", "test_rnn_seq_length", "test_convtranspose_pads", "test_scatternd",
  "test_dynamicquantizelinear_expanded", "test_qlinearmatmul_2D", "test_hannwindow", "test_adam",
  "test_gridsample_bicubic", "test_gridsample_reflection_padding", "test_bitshift_left_uint8",
  "test_range_float_type_positive_delta", "test_depthtospace_crd_mode", "test_det_2d", "test_det_nd",
  "test_if", "test_scan9_sum", "test_scan_sum", "test_cumsum_1d_reverse_exclusive", "test_cumsum_2d_axis_1",
  "test_top_k_smallest", "test_sequence_map_add_2_sequences", "test_loop13_seq", "test_loop11", "test_if_opt",
  "test_optional_get_element_sequence", "test_optional_has_element_empty", "test_unique_sorted_with_axis_3d",
  "test_unique_not_sorted_without_axis", "test_scatternd_multiply",
}

describe("ONNX backend tests (libonnx-testdata)", function()
  local have = H.exists(C.ROOT .. "/node/test_add_bcast/model.onnx")
  local function case(suite, name)
    local label = suite .. "/" .. name .. " matches ONNX's expected outputs (rtol 1e-3, atol 1e-7)"
    if not have then return pending(label .. " (libonnx-testdata is absent)") end
    it(label, function()
      local r = C.run(C.ROOT .. "/" .. suite .. "/" .. name)
      assert.are.equal("pass", r.status, r.reason)
    end)
  end
  for _, name in ipairs(SUBSET) do case("node", name) end
  case("simple", "test_expand_shape_model1")
  case("simple", "test_sequence_model3")
  case("simple", "test_sequence_model6")
  case("pytorch-converted", "test_Conv2d_groups")

  it("the runner reports a wrong output as a mismatch with its max error", function()
    if not have then return end
    local dir = H.tmpdir()
    local src = C.ROOT .. "/node/test_relu"
    os.execute(("cp -r '%s' '%s/t'"):format(src, dir))
    -- the expected output replaced by the input: relu differs from it at the negative entries
    os.execute(("cp '%s/t/test_data_set_0/input_0.pb' '%s/t/test_data_set_0/output_0.pb'"):format(dir, dir))
    local r = C.run(dir .. "/t")
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal("fail", r.status)
    assert.truthy(r.reason:find("^output 1: mismatch, max error"), r.reason)
  end)

  it("the runner compares sequence outputs element by element and names the differing element", function()
    if not have then return end
    local dir = H.tmpdir()
    os.execute(("cp -r '%s/node/test_loop13_seq' '%s/t'"):format(C.ROOT, dir))
    local want = dle.onnx.load_sequence(dir .. "/t/test_data_set_0/output_0.pb")
    local function expect(list)
      local t = {}
      for i, x in ipairs(list) do t[i] = W.tensor("", x) end
      H.write_file(dir .. "/t/test_data_set_0/output_0.pb", W.sequence("seq_res", t))
      return C.run(dir .. "/t")
    end
    local same = expect(want)
    local changed = {table.unpack(want)}
    changed[2] = changed[2] + 1
    local wrong = expect(changed)
    local shorter = expect({want[1]})
    os.execute("rm -rf '" .. dir .. "'")
    assert.are.equal("pass", same.status, same.reason)
    assert.are.equal("fail", wrong.status)
    assert.truthy(wrong.reason:find("^output 1%[2%]: mismatch"), wrong.reason)
    assert.truthy(shorter.reason:find("^output 1: sequence of %d+, expected 1"), shorter.reason)
  end)
end)
