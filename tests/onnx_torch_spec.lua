-- onnx_torch_spec.lua — real exports (issue 19 point 5): models that torch.onnx.export writes from
-- PyTorch and torchvision (tests/torch_onnx_models.py: an MLP, a CNN with batch norm, resnet18 and
-- mobilenet_v2 with random weights, a 2-layer LSTM, a TransformerEncoder, a torch.jit.script model
-- with a data-dependent `if` and a `for` whose trip count is read at run time) imported with
-- dle.onnx.load and run on PyTorch's inputs; the outputs must match PyTorch's (saved as .npy)
-- within 1e-4 of the outputs' scale. Skipped when /usr/bin/python3 cannot import torch.
local dle = require("dle")
local H = require("helpers")

local MODELS = {"mlp", "cnn", "resnet18", "mobilenet_v2", "lstm", "transformer", "scripted"}

describe("dle.onnx.load on torch.onnx.export's files", function()
  if not H.torch_available() then
    return pending("PyTorch models (python3 cannot import torch)")
  end
  local dir = H.tmpdir()
  local status = {}
  setup(function()
    local p = io.popen(("/usr/bin/python3 tests/torch_onnx_models.py '%s' 2>/dev/null"):format(dir))
    for line in p:lines() do
      local name, rest = line:match("^(%S+) (.*)$")
      if name then status[name] = rest end
    end
    p:close()
  end)
  teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

  local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
  end

  for _, name in ipairs(MODELS) do
    it(("imports %s and matches PyTorch's outputs within 1e-4"):format(name), function()
      assert.are.equal("ok", status[name], name .. ": the Python side said " .. tostring(status[name]))
      local m = dle.onnx.load(("%s/%s.onnx"):format(dir, name), {requires_grad = false})
      local ins = {}
      while exists(("%s/%s.in%d.npy"):format(dir, name, #ins + 1)) do
        ins[#ins + 1] = dle.load_npy(("%s/%s.in%d.npy"):format(dir, name, #ins + 1))
      end
      local outs = table.pack(dle.no_grad(function() return m(table.unpack(ins)) end))
      assert.are.equal(#m.output_names, outs.n)
      for i = 1, outs.n do
        local want = dle.load_npy(("%s/%s.out%d.npy"):format(dir, name, i))
        assert.are.same(want:shape(), outs[i]:shape())
        local scale = math.max(1, want:abs():max():item())
        local diff = H.max_diff(outs[i], want)
        assert.is_true(diff <= 1e-4 * scale,
                       ("%s output %d differs from PyTorch's by %g (scale %g)"):format(name, i, diff, scale))
      end
    end)
  end
end)
