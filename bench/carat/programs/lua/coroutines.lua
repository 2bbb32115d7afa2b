-- Coroutines: generators, pipelines, many live threads with their own stacks, yields
-- across pcall and metamethods, errors, close, and deep stacks inside a coroutine.

-- A generator of the first n primes (trial division), consumed by wrap.
local function primes(n)
  return coroutine.wrap(function()
    local found = {}
    local c = 2
    while #found < n do
      local isp = true
      for _, p in ipairs(found) do
        if p * p > c then break end
        if c % p == 0 then isp = false; break end
      end
      if isp then found[#found + 1] = c; coroutine.yield(c) end
      c = c + 1
    end
  end)
end
local s, last = 0, 0
for p in primes(5000) do s = s + p; last = p end
assert(last == 48611 and s == 114455259)

-- Status transitions and values through resume/yield.
local co = coroutine.create(function(a, b)
  assert(coroutine.status(coroutine.running()) == "running")
  local c = coroutine.yield(a + b)
  local d, e = coroutine.yield(c * 2)
  return d + e, "done"
end)
assert(coroutine.status(co) == "suspended")
local ok, v = coroutine.resume(co, 1, 2); assert(ok and v == 3)
ok, v = coroutine.resume(co, 10); assert(ok and v == 20)
local ok2, r1, r2 = coroutine.resume(co, 4, 5)
assert(ok2 and r1 == 9 and r2 == "done" and coroutine.status(co) == "dead")
ok, v = coroutine.resume(co)
assert(not ok and v == "cannot resume dead coroutine")
local _, ismain = coroutine.running(); assert(ismain)
assert(not coroutine.isyieldable())

-- A pipeline: producer -> filter -> filter -> consumer, each a coroutine.
local function producer(n)
  return coroutine.wrap(function() for i = 1, n do coroutine.yield(i) end end)
end
local function filter(src, f)
  return coroutine.wrap(function()
    for x in src do local y = f(x); if y then coroutine.yield(y) end end
  end)
end
local pipe = filter(filter(producer(100000), function(x) if x % 3 == 0 then return x end end),
                    function(x) return x * 2 end)
s = 0
for x in pipe do s = s + x end
assert(s == 2 * 3 * (33333 * 33334 // 2))

-- Many live coroutines at once, resumed round-robin: each has its own stack, which grows.
local NC = 2000
local cos = {}
for i = 1, NC do
  cos[i] = coroutine.create(function()
    local acc = 0
    for step = 1, 20 do
      local pad = {}
      for j = 1, step do pad[j] = i * j end        -- some garbage per step
      acc = acc + pad[step]
      coroutine.yield(acc)
    end
    return acc
  end)
end
local total = 0
for _ = 1, 21 do
  for i = 1, NC do
    if coroutine.status(cos[i]) == "suspended" then
      local okr, val = coroutine.resume(cos[i])
      assert(okr, val)
      if coroutine.status(cos[i]) == "dead" then total = total + val end
    end
  end
end
assert(total == 210 * (NC * (NC + 1) // 2))

-- Deep recursion inside a coroutine, yielding from the bottom (the thread's stack grows
-- and is reallocated while suspended frames point into it).
local function dig(n)
  if n == 0 then coroutine.yield("bottom"); return 0 end
  local here = n
  local r = dig(n - 1)
  return r + here
end
local deepco = coroutine.create(function() return dig(20000) end)
ok, v = coroutine.resume(deepco); assert(ok and v == "bottom")
collectgarbage()                              -- shrinking stacks of suspended threads
ok, v = coroutine.resume(deepco); assert(ok and v == 20000 * 20001 // 2)

-- Yield across pcall, and across a metamethod (__index function) and table.sort's
-- comparator is not yieldable (a C boundary).
local yco = coroutine.wrap(function()
  local okp, res = pcall(function()
    local x = coroutine.yield(1)
    error({code = x})
  end)
  assert(not okp and res.code == 42)
  local mt = {__index = function(_, k) return coroutine.yield(k) end}
  local obj = setmetatable({}, mt)
  local got = obj.field
  coroutine.yield("got " .. got)
  local okc, errc = pcall(table.sort, {3, 2, 1}, function(a, b) coroutine.yield(); return a < b end)
  coroutine.yield(okc == false and errc:find("yield across") ~= nil)
  return "end"
end)
assert(yco() == 1)
assert(yco(42) == "field")
assert(yco("value") == "got value")
assert(yco() == true)
assert(yco() == "end")

-- Errors inside coroutines, with tracebacks, and coroutine.close on suspended threads with
-- pending to-be-closed variables.
local eco = coroutine.create(function() local t = nil; return t.x end)
ok, v = coroutine.resume(eco)
assert(not ok and v:find("attempt to index a nil value"))
assert(debug.traceback(eco):find("stack traceback"))
local closed = {}
local cco = coroutine.create(function()
  local res <close> = setmetatable({}, {__close = function() closed[#closed + 1] = "res" end})
  coroutine.yield(1)
  error("not reached")
end)
assert(coroutine.resume(cco))
assert(coroutine.close(cco) == true and closed[1] == "res")
assert(coroutine.status(cco) == "dead")

-- Threads as table keys and garbage: coroutines dropped unfinished are collected.
local reg = setmetatable({}, {__mode = "k"})
for i = 1, 1000 do
  local c = coroutine.create(function() coroutine.yield(i) end)
  coroutine.resume(c)
  reg[c] = i
end
collectgarbage(); collectgarbage()
assert(next(reg) == nil)

-- A scheduler of coroutines computing Collatz lengths, interleaved.
local function collatz(n)
  return coroutine.create(function()
    local steps = 0
    while n ~= 1 do
      if n % 2 == 0 then n = n // 2 else n = 3 * n + 1 end
      steps = steps + 1
      if steps % 10 == 0 then coroutine.yield() end
    end
    return steps
  end)
end
local queue, lens = {}, {}
for i = 1, 3000 do queue[#queue + 1] = {i, collatz(i)} end
while #queue > 0 do
  local nextq = {}
  for _, e in ipairs(queue) do
    local okc, st = coroutine.resume(e[2])
    assert(okc)
    if coroutine.status(e[2]) == "dead" then lens[e[1]] = st else nextq[#nextq + 1] = e end
  end
  queue = nextq
end
local best, bestn = 0, 0
for i = 1, 3000 do if lens[i] > best then best, bestn = lens[i], i end end
assert(bestn == 2919 and best == 216 and lens[27] == 111)
