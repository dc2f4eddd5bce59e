-- onnx_spec.lua — dle.onnx: the loader on models written by tests/onnx_writer.lua (inputs and
-- outputs, parameters, dynamic batch, opset-dependent semantics, tracing, malformed files), a model
-- built with python3-onnx's helper (skipped without it), and a fixed subset of ONNX 1.12's backend
-- tests from Debian's libonnx-testdata (skipped without it) through dle.onnx.conformance, the
-- runner of scripts/onnx-conformance.
local dle = require "dle"
local H = require "helpers"
local W = require "onnx_writer"
local C = require "dle.onnx.conformance"

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

  it("keeps dle.onnx.missing (ops dle cannot express) apart from the mapped ops", function()
    for _, op in ipairs(dle.onnx.missing) do assert.is_nil(dle.onnx.ops[op], op) end
    for _, op in ipairs({"Conv", "LSTM", "Resize", "Softmax", "ReduceSum", "Gather"}) do
      assert.is_function(dle.onnx.ops[op], op)
    end
  end)

  it("lists every unsupported op with its node name in one load-time error", function()
    local err = H.assert_error(function()
      dle.onnx.load(W.model{nodes = {W.node("Foo", {"x"}, {"y"}, nil, "first"), W.node("Relu", {"y"}, {"z"}),
                                     W.node("Unique", {"z"}, {"q"}, nil, "second")}})
    end, "dle.onnx.load: (bytes): unsupported ONNX ops at opset 13", "Foo (node 'first')", "Unique (node 'second')")
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
      {init_model{name = "t", dims = {2}, data_type = 3, raw = "12"}, "tensor 't': unsupported data type INT8 (3)"},
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
  "test_if", "test_scan9_sum", "test_cumsum_1d_reverse_exclusive", "test_cumsum_2d_axis_1", "test_top_k_smallest",
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
end)
