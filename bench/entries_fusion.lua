--- bench/entries_fusion.lua — dle.compile's fused elementwise chains on 16M float32, in GB/s of
-- the bytes the fused program must move (4 inputs read, 1 output written), against the same
-- function run eagerly by dle (issue 21's targets: >= 1.8x for the seeds' E = D + (A + B) * C,
-- >= 3x for a 7-op chain), against the STREAM triad (>= 0.8x) and against PyTorch eager; and a
-- reduction at the end of a chain, the mean squared difference of A and B (2 inputs read, one
-- number written: >= 0.8x STREAM triad).
-- Bandwidth drifts on this shared machine, so each figure alternates its sides over 3 rounds.
return function(ctx)
  local dle = ctx.dle
  local N = 16 * 1024 * 1024
  local GB = 4 / 1e9
  local function three(a, b, c, d) return d + (a + b) * c end
  local function seven(a, b, c, d) return ((((a + b) * c - d) * a + b) * c - d) end
  local torch_setup = "a, b, c, d = (torch.randn(16777216) for _ in range(4))"
  local function entry(key, name, fn, target, torch_body, arrays)
    local function inputs() return dle.randn(N), dle.randn(N), dle.randn(N), dle.randn(N) end
    return {
      key = key, name = name, unit = "GB/s", work = (arrays or 5) * N * GB, target = target, rounds = 3,
      dle = function()
        local a, b, c, d = inputs()
        local compiled = dle.compile(fn)
        return function() return compiled(a, b, c, d) end
      end,
      refs = {
        {kind = "lua", label = "dle eager", fn = function()
          local a, b, c, d = inputs()
          return function() return fn(a, b, c, d) end
        end},
        {kind = "c", label = "STREAM triad", task = ctx.stream_task("triad")},
        {kind = "torch", label = "PyTorch", setup = torch_setup, body = torch_body},
      },
    }
  end
  return {
    entry("fused_3op", "compiled E = D + (A+B)*C, 16M float32", three, {ref = "dle eager", min = 1.8},
      "e = d + (a + b) * c"),
    entry("fused_7op", "compiled 7-op chain of A, B, C, D, 16M float32", seven, {ref = "dle eager", min = 3},
      "e = ((((a + b) * c - d) * a + b) * c - d)"),
    entry("fused_mse", "compiled ((A-B)*(A-B)):mean(), 16M float32",
      function(a, b) return ((a - b) * (a - b)):mean() end,
      {ref = "STREAM triad", min = 0.8}, "e = ((a - b) * (a - b)).mean()", 2),
  }
end
