--- bench/entries_memory.lua — memory-bound kernels in GB/s (bytes that must move / time, counted
-- as STREAM counts them: every input read once, the output written once) against the STREAM
-- triad of bench_ref (the issue's targets are fractions of it) and PyTorch: elementwise add/mul/exp
-- on 16M float32, contiguous and with a transposed input; sums over either dimension of a
-- 4096x4096; softmax, log_softmax and layer_norm over the rows of a 4096x1024. Bandwidth drifts on
-- this shared machine, so each figure alternates dle and its references over 3 rounds.
return function(ctx)
  local dle = ctx.dle
  local F = dle.nn.functional
  local N = 16 * 1024 * 1024           -- = 4096 * 4096
  local GB = 4 / 1e9                    -- bytes per float32, in GB
  local entries = {}

  local function add(key, name, bytes, target, setup_dle, torch_setup, torch_body)
    entries[#entries + 1] = {
      key = key, name = name, unit = "GB/s", work = bytes * GB, target = target, rounds = 3,
      dle = setup_dle,
      refs = {
        {kind = "c", label = "STREAM triad", task = ctx.stream_task("triad")},
        {kind = "torch", label = "PyTorch", setup = torch_setup, body = torch_body},
      },
    }
  end

  -- contiguous 16M float32
  local flat = "a = torch.randn(16777216)\nb = torch.randn(16777216)"
  add("add", "a + b, 16M float32", 3 * N, {ref = "STREAM triad", min = 0.85},
    function() local a, b = dle.randn(N), dle.randn(N); return function() return a + b end end,
    flat, "c = a + b")
  add("mul", "a * b, 16M float32", 3 * N, {ref = "STREAM triad", min = 0.85},
    function() local a, b = dle.randn(N), dle.randn(N); return function() return a * b end end,
    flat, "c = a * b")
  add("exp", "exp(a), 16M float32", 2 * N, {ref = "STREAM triad", min = 0.85},
    function() local a = dle.randn(N); return function() return a:exp() end end,
    flat, "c = a.exp()")

  -- a transposed input: a 4096x4096 viewed through :t(), added to / multiplied with a contiguous one
  local sq = "a = torch.randn(4096, 4096).t()\nb = torch.randn(4096, 4096)"
  add("add_t", "a:t() + b, 4096x4096 float32", 3 * N, {ref = "STREAM triad", min = 0.5},
    function() local a, b = dle.randn(4096, 4096):t(), dle.randn(4096, 4096); return function() return a + b end end,
    sq, "c = a + b")
  add("mul_t", "a:t() * b, 4096x4096 float32", 3 * N, {ref = "STREAM triad", min = 0.5},
    function() local a, b = dle.randn(4096, 4096):t(), dle.randn(4096, 4096); return function() return a * b end end,
    sq, "c = a * b")
  add("exp_t", "exp(a:t()), 4096x4096 float32", 2 * N, {ref = "STREAM triad", min = 0.5},
    function() local a = dle.randn(4096, 4096):t(); return function() return a:exp() end end,
    sq, "c = a.exp()")

  -- reductions (the output, 4096 floats, is counted too)
  local x44 = "x = torch.randn(4096, 4096)"
  add("sum_last", "x:sum(2) (last dim), 4096x4096 float32", N + 4096, {ref = "STREAM triad", min = 0.8},
    function() local x = dle.randn(4096, 4096); return function() return x:sum(2) end end,
    x44, "s = x.sum(1)")
  add("sum_first", "x:sum(1) (dim 1), 4096x4096 float32", N + 4096, {ref = "STREAM triad", min = 0.8},
    function() local x = dle.randn(4096, 4096); return function() return x:sum(1) end end,
    x44, "s = x.sum(0)")

  -- row-wise normalisations of a 4096x1024 (read once, written once)
  local R = 4096 * 1024
  local x41 = "x = torch.randn(4096, 1024)\nw = torch.randn(1024)\nb = torch.randn(1024)"
  add("softmax", "softmax over rows, 4096x1024 float32", 2 * R, {ref = "STREAM triad", min = 0.6},
    function() local x = dle.randn(4096, 1024); return function() return x:softmax(2) end end,
    x41, "y = torch.softmax(x, 1)")
  add("log_softmax", "log_softmax over rows, 4096x1024 float32", 2 * R, {ref = "STREAM triad", min = 0.6},
    function() local x = dle.randn(4096, 1024); return function() return x:log_softmax(2) end end,
    x41, "y = torch.log_softmax(x, 1)")
  add("layer_norm", "layer_norm over rows, 4096x1024 float32", 2 * R + 2 * 1024, {ref = "STREAM triad", min = 0.6},
    function()
      local x, w, b = dle.randn(4096, 1024), dle.randn(1024), dle.randn(1024)
      return function() return F.layer_norm(x, w, b) end
    end,
    x41, "y = torch.nn.functional.layer_norm(x, (1024,), w, b)")
  return entries
end
