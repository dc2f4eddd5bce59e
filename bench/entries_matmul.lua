--- bench/entries_matmul.lua — float32 matmul throughput (GFLOP/s = 2*m*n*k / time) against raw
-- cblas_sgemm of the same sizes (bench_ref) and torch.mm, and a transposed operand a:t() @ b,
-- which must reach BLAS directly (a transposed flag, no copy): its row also reports the bytes the
-- call allocated beyond its output. Both sides call the same sgemm, so the ratio is mostly the
-- machine's drift between them: each figure alternates dle and its references over 3 rounds.
return function(ctx)
  local dle = ctx.dle
  local entries = {}

  local function square(n)
    return {
      key = "matmul_" .. n,
      name = string.format("matmul %dx%d @ %dx%d", n, n, n, n),
      unit = "GFLOP/s", work = 2 * n ^ 3 / 1e9, target = {ref = "cblas_sgemm", min = 0.97}, rounds = 3,
      dle = function()
        local a, b = dle.randn(n, n), dle.randn(n, n)
        return function() return a:matmul(b) end
      end,
      refs = {
        {kind = "c", label = "cblas_sgemm", task = string.format("sgemm:%d:%d:%d", n, n, n)},
        {kind = "torch", label = "torch.mm", setup = string.format("a = torch.randn(%d, %d)\nb = torch.randn(%d, %d)",
                                                                   n, n, n, n),
         body = "c = torch.mm(a, b)"},
      },
    }
  end
  for _, n in ipairs({512, 1024, 2048}) do entries[#entries + 1] = square(n) end

  -- the first layer of the Fashion-MNIST MLP's shape: batch 128 x 784 times 784 x 512
  entries[#entries + 1] = {
    key = "matmul_batch",
    name = "matmul 128x784 @ 784x512",
    unit = "GFLOP/s", work = 2 * 128 * 784 * 512 / 1e9, target = {ref = "cblas_sgemm", min = 0.97}, rounds = 3,
    dle = function()
      local x, w = dle.randn(128, 784), dle.randn(784, 512)
      return function() return x:matmul(w) end
    end,
    refs = {
      {kind = "c", label = "cblas_sgemm", task = "sgemm:128:512:784"},
      {kind = "torch", label = "torch.mm", setup = "x = torch.randn(128, 784)\nw = torch.randn(784, 512)",
       body = "c = torch.mm(x, w)"},
    },
  }

  entries[#entries + 1] = {
    key = "matmul_t_1024",
    name = "matmul a:t() @ b, 1024x1024 (a transposed view)",
    unit = "GFLOP/s", work = 2 * 1024 ^ 3 / 1e9, target = {ref = "cblas_sgemm (TransA)", min = 0.97}, rounds = 3,
    dle = function()
      local a, b = dle.randn(1024, 1024), dle.randn(1024, 1024)
      return function() return a:t():matmul(b) end
    end,
    check = function()
      local a, b = dle.randn(1024, 1024), dle.randn(1024, 1024)
      local extra = ctx.extra_bytes(function() return a:t():matmul(b) end)
      return extra == 0 and "no copy: allocates only its output" or
        string.format("allocates %d bytes beyond its output (a copy of an operand)", extra)
    end,
    refs = {
      {kind = "c", label = "cblas_sgemm (TransA)", task = "sgemm_tn:1024:1024:1024"},
      {kind = "torch", label = "torch.mm(a.t(), b)", setup = "a = torch.randn(1024, 1024)\nb = torch.randn(1024, 1024)",
       body = "c = torch.mm(a.t(), b)"},
    },
  }
  return entries
end
