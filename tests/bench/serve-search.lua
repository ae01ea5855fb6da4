-- wrk script for kb serve's POST /v1/search (scripts/bench-serve.sh):
--   wrk -s tests/bench/serve-search.lua URL -- BODIES
-- BODIES holds one request body (the search tool's arguments) a line;
-- each connection walks them from its own starting point.
local bodies = {}
local i = 0

function init(args)
  local f = assert(io.open(args[1], "r"), "cannot open the bodies file")
  for line in f:lines() do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  f:close()
  assert(#bodies > 0, "no request bodies")
  i = math.random(#bodies)
end

function request()
  i = i % #bodies + 1
  return wrk.format("POST", "/v1/search",
                    { ["Content-Type"] = "application/json" }, bodies[i])
end
