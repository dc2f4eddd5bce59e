--- bench/entries_onnx.lua — ONNX exchange (issue 19 point 6): inference of torchvision's resnet18
-- (random weights, eval mode) as exported by torch.onnx.export and imported with dle.onnx.load,
-- at batch 1 and 8 on 224x224, vs PyTorch running the same architecture (target: at most 1.0x
-- its time); and dle.onnx.load of a 100 MB model (an MLP of 25M float32 parameters written by
-- dle.onnx.save; target: under 1 s). The resnet18 figures need torch and torchvision (the file
-- is written by tests/torch_onnx_models.py) and are left out without them.
return function(ctx)
  local dle = ctx.dle
  local vs_torch = require("bench.vs_torch")
  local entries = {}
  local tmp = os.tmpname()
  os.remove(tmp)
  os.execute("mkdir -p " .. ctx.shell_quote(tmp))

  if ctx.torch_importable() then
    local path
    local function resnet()
      if not path then
        os.execute(("%s %s %s resnet18 >/dev/null 2>&1"):format(ctx.python,
          ctx.shell_quote(ctx.root .. "/tests/torch_onnx_models.py"), ctx.shell_quote(tmp)))
        path = tmp .. "/resnet18.onnx"
      end
      return dle.onnx.load(path, {requires_grad = false})
    end
    for _, batch in ipairs({1, 8}) do
      entries[#entries + 1] = vs_torch("onnx_resnet18_b" .. batch,
        ("resnet18 (ONNX import) inference, batch %d, 224x224"):format(batch), 1.0, 3, function()
          local m = resnet()
          local x = dle.randn(batch, 3, 224, 224)
          return function() return dle.no_grad(function() return m(x) end) end
        end, ([[
import torchvision
m = torchvision.models.resnet18(weights=None).eval()
x = torch.randn(%d, 3, 224, 224)]]):format(batch), "with torch.no_grad():\n    y = m(x)")
    end
  end

  local big
  entries[#entries + 1] = {
    key = "onnx_import_100mb", name = "dle.onnx.load of a 100 MB model (MLP, 25M float32 parameters)",
    unit = "ms", scale = 1e3, target = {max_value = 1000}, rounds = 1,
    dle = function()
      if not big then
        big = tmp .. "/mlp25m.onnx"
        local m = dle.nn.Sequential(dle.nn.Linear(2500, 5000), dle.nn.ReLU(), dle.nn.Linear(5000, 2500))
        dle.onnx.save(big, m, {dle.randn(1, 2500)})
      end
      return function() return dle.onnx.load(big, {requires_grad = false}) end
    end,
  }
  return entries
end
