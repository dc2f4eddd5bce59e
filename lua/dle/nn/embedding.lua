--- dle.nn.Embedding(n, d, {dtype, generator, padding_idx}): a table of n vectors of size d,
-- indexed by 1-based int64 ids (the fused embedding op); weight ~ N(0, 1). With padding_idx, that
-- row starts at zero and receives no gradient.
local dle = require("dle")
local check = require("dle.check")
local Module = require("dle.nn.module")
local F = require("dle.nn.functional")

local Embedding = Module:extend("Embedding")

--- @param num_embeddings integer n
-- @param embedding_dim integer d
-- @param opts optional {dtype = "float32", generator = g, padding_idx = i (1..n)}
function Embedding:init(num_embeddings, embedding_dim, opts)
  opts = check.layer_args("Embedding", opts, {"dtype", "generator", "padding_idx"}, "positive integer sizes (n, d)",
                          num_embeddings, embedding_dim)
  local pad = opts.padding_idx
  if pad ~= nil and (math.type(pad) ~= "integer" or pad < 1 or pad > num_embeddings) then
    check.error("Embedding: padding_idx must be an integer in 1.." .. num_embeddings .. ", got " .. tostring(pad))
  end
  self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, pad
  self.weight = dle.randn(num_embeddings, embedding_dim, {dtype = opts.dtype or "float32", generator = opts.generator})
  if pad then self.weight:narrow(1, pad, 1):zero_() end
  self.weight:requires_grad_(true)
end

--- @param ids int64 tensor of 1-based ids, any shape
-- @return tensor {ids shape..., d}
function Embedding:forward(ids)
  return F.embedding(ids, self.weight, {padding_idx = self.padding_idx})
end

function Embedding:extra_repr()
  return self.num_embeddings .. ", " .. self.embedding_dim .. (self.padding_idx and ", padding_idx="
                                                               .. self.padding_idx or "")
end

return Embedding
