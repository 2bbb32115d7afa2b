-- Closures and upvalues: sharing, closing, per-iteration locals, recursion, varargs, load
-- with environments, string.dump round trips.

-- Counters: each closure has its own upvalue, and two closures of one scope share theirs.
local function counter(start)
  local n = start
  return function() n = n + 1; return n end, function() return n end
end
local inc1, get1 = counter(0)
local inc2, get2 = counter(100)
for _ = 1, 1000 do inc1() end
for _ = 1, 10 do inc2() end
assert(get1() == 1000 and get2() == 110)

-- A fresh local per loop iteration: closures made in a loop see their own value.
local fs = {}
for i = 1, 10000 do fs[i] = function() return i * 2 end end
local s = 0
for i = 1, 10000 do s = s + fs[i]() end
assert(s == 10000 * 10001)

-- Open upvalues closed when the block ends, while other closures still share them.
local getters, setters = {}, {}
for i = 1, 1000 do
  local v = i
  getters[i] = function() return v end
  setters[i] = function(x) v = x end
end
for i = 1, 1000, 2 do setters[i](-i) end
s = 0
for i = 1, 1000 do s = s + getters[i]() end
-- evens keep their value (250500), odds were negated (-250000)
assert(s == 500)

-- Nested closures three levels deep, sharing an upvalue of the outermost.
local function outer()
  local x = 0
  local function middle()
    local y = 0
    return function(d) x = x + d; y = y + 1; return x, y end
  end
  return middle(), middle(), function() return x end
end
local f1, f2, gx = outer()
f1(5); f2(7); local x1, y1 = f1(1)
assert(x1 == 13 and y1 == 2 and gx() == 13)

-- debug.upvalueid / upvaluejoin: shared upvalues and a join.
local a1, b1 = counter(0)
assert(debug.upvalueid(a1, 1) == debug.upvalueid(b1, 1))
local a2 = counter(50)
debug.upvaluejoin(a2, 1, a1, 1)
a2(); a2()
assert(b1() == 2)

-- Recursion: Ackermann (small), mutual recursion, and a deep non-tail recursion that
-- grows the Lua stack a lot (reallocations of the stack with open upvalues into it).
local function ack(m, n)
  if m == 0 then return n + 1 end
  if n == 0 then return ack(m - 1, 1) end
  return ack(m - 1, ack(m, n - 1))
end
assert(ack(2, 3) == 9 and ack(3, 3) == 61)
local iseven, isodd
function iseven(n) if n == 0 then return true end return isodd(n - 1) end
function isodd(n) if n == 0 then return false end return iseven(n - 1) end
assert(iseven(10000) and isodd(7777))
local function deep(n, acc)
  local here = n
  local f = function() return here end
  if n == 0 then return acc end
  local r = deep(n - 1, acc + f())
  return r + (here - f())                -- the upvalue still reads the right frame
end
assert(deep(50000, 0) == 50000 * 50001 // 2)
-- Tail calls do not grow the stack.
local function loop(n, acc) if n == 0 then return acc end return loop(n - 1, acc + n) end
assert(loop(1000000, 0) == 1000000 * 1000001 // 2)

-- Varargs.
local function va(...)
  local n = select("#", ...)
  local t = {...}
  return n, #t, (select(n > 0 and n or 1, ...))
end
local n, len, last = va(1, 2, 3, nil)
assert(n == 4 and last == nil)
n, len, last = va(7, 8, 9)
assert(n == 3 and len == 3 and last == 9)
local function sum(...)
  local t = 0
  for i = 1, select("#", ...) do t = t + (select(i, ...)) end
  return t
end
local args = {}
for i = 1, 200 do args[i] = i end
assert(sum(table.unpack(args)) == 20100)

-- load with a custom environment, and closures that capture _ENV.
local env = {y = 10}
local chunk = load("x = y * 2; return function() return x + y end", "chunk", "t", env)
local fx = chunk()
assert(env.x == 20 and fx() == 30 and rawget(_G, "x") == nil)
env.y = 1
assert(fx() == 21)
-- Generated code: many functions compiled, each a closure over its index.
local src = {}
for i = 1, 300 do src[#src + 1] = ("local u%d = %d"):format(i, i) end
src[#src + 1] = "return function() return 0"
for i = 1, 300, 3 do src[#src + 1] = (" + u%d"):format(i) end
src[#src + 1] = " end"
local ok, err = load(table.concat(src, "\n"))
assert(not ok and err:find("too many local variables"))   -- 200 locals max
src = {"local t = {}"}
for i = 1, 150 do src[#src + 1] = ("local u%d = %d"):format(i, i) end
src[#src + 1] = "return function() return 0"
for i = 1, 150 do src[#src + 1] = (" + u%d"):format(i) end
src[#src + 1] = " end"
assert(load(table.concat(src, "\n"))()() == 150 * 151 // 2)

-- string.dump and load of binary chunks (upvalues come back fresh).
local function poly(x) return 3 * x * x + 2 * x + 1 end
local dumped = string.dump(poly)
local poly2 = load(dumped, "poly", "b")
for i = -50, 50 do assert(poly2(i) == poly(i)) end
assert(not load(dumped, "poly", "t"))

-- Memoisation through closures and a table: Fibonacci to 90 (fits in 64 bits).
local function memo(f)
  local cache = {}
  return function(k)
    local v = cache[k]
    if v == nil then v = f(k); cache[k] = v end
    return v
  end
end
local fib
fib = memo(function(k) if k < 2 then return k end return fib(k - 1) + fib(k - 2) end)
assert(fib(90) == 2880067194370816120)

-- Many closures alive at once, then dropped and collected.
local many = {}
for i = 1, 100000 do local c = i; many[i] = function() return c end end
s = 0
for i = 1, 100000, 1000 do s = s + many[i]() end
assert(s == 100 * 1 + 1000 * (99 * 100 // 2))
many = nil
collectgarbage()
