--- bench/one_input.lua — the common entry of the op-family bench files: an op on one randn input
-- of the given shape, timed in milliseconds beside the same op in PyTorch.
-- one_input(ctx, entries, max, rounds)(key, name, shape, expr_dle, expr_torch) appends an entry
-- whose target is at most max times PyTorch's time, measured over rounds (default 3) alternating
-- rounds; expr_torch is Python over x (the statement timed).
return function(ctx, entries, max, rounds)
  local dle = ctx.dle
  return function(key, name, shape, expr_dle, expr_torch)
    local dims = table.concat(shape, ", ")
    entries[#entries + 1] = {
      key = key, name = name, unit = "ms", scale = 1e3, target = {ref = "PyTorch", max = max}, rounds = rounds or 3,
      dle = function()
        local x = dle.randn(table.unpack(shape))
        return function() return expr_dle(x) end
      end,
      refs = {{kind = "torch", label = "PyTorch", setup = "x = torch.randn(" .. dims .. ")", body = expr_torch}},
    }
  end
end
