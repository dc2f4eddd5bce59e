--- dle.nn.Embedding(n, d, {dtype, generator}): a table of n vectors of size d, indexed by 1-based
-- int64 ids; weight ~ N(0, 1).
local dle = require "dle"
local Module = require "dle.nn.module"
local F = require "dle.nn.functional"

local Embedding = Module:extend("Embedding")

--- @param num_embeddings integer n
-- @param embedding_dim integer d
-- @param opts optional {dtype = "float32", generator = g}
function Embedding:init(num_embeddings, embedding_dim, opts)
  opts = opts or {}
  if math.type(num_embeddings) ~= "integer" or num_embeddings < 1 or math.type(embedding_dim) ~= "integer" or embedding_dim < 1 then
    error("Embedding: expected positive integer sizes (n, d), got " .. tostring(num_embeddings) .. ", " .. tostring(embedding_dim), 3)
  end
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  self.weight = dle.randn(num_embeddings, embedding_dim, {dtype = opts.dtype or "float32", generator = opts.generator})
    :requires_grad_(true)
end

--- @param ids int64 tensor of 1-based ids, any shape
-- @return tensor {ids shape..., d}
function Embedding:forward(ids)
  return F.embedding(ids, self.weight)
end

function Embedding:extra_repr() return self.num_embeddings .. ", " .. self.embedding_dim end

return Embedding
