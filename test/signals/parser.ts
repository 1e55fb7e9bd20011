import t from 'tap';
import { parsePrometheus } from '../../src/signals/prom.js';
import { signalsFromMetrics, adaptersFromModels, maxModelLenFromModels } from '../../src/signals/engines.js';

// shaped after a real vLLM 0.8 /metrics page (trimmed)
export const VLLM_TEXT = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.4213
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.7301e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="support-bot-lora,sql",waiting_lora_adapters="other"} 1.7302e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_cpu_blocks="2048",num_gpu_blocks="27153",swap_space="4"} 1.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 42.0
vllm:time_to_first_token_seconds_count{model_name="m"} 42.0
vllm:time_to_first_token_seconds_sum{model_name="m"} 3.14
# HELP python_info odd labels
python_info{implementation="CPython",note="say \\"hi\\"\\nback\\\\slash",version="3.12"} 1.0
weird_nan NaN
weird_inf{a="b"} +Inf 1700000000000
weird_neg -Inf
broken{a="b" 1
also broken
`;

t.test('parser: labels with escapes, histograms, NaN/Inf, timestamps, comments, junk', async (t) => {
  const f = parsePrometheus(VLLM_TEXT);
  t.equal(f.get('vllm:num_requests_running')?.[0].value, 3);
  t.equal(f.get('vllm:num_requests_running')?.[0].labels.model_name, 'meta-llama/Llama-3.1-8B-Instruct');
  t.same(f.get('python_info')?.[0].labels.note, 'say "hi"\nback\\slash');
  t.equal(f.get('vllm:time_to_first_token_seconds_bucket')?.length, 2);
  t.equal(f.get('vllm:time_to_first_token_seconds_bucket')?.[1].labels.le, '+Inf');
  t.equal(f.get('vllm:time_to_first_token_seconds_sum')?.[0].value, 3.14);
  t.ok(Number.isNaN(f.get('weird_nan')?.[0].value));
  t.equal(f.get('weird_inf')?.[0].value, Infinity);
  t.equal(f.get('weird_neg')?.[0].value, -Infinity);
  t.notOk(f.has('broken'));
  t.notOk(f.has('also'));
  t.equal(parsePrometheus('a 1\r\nb{x="1"} 2\r\n').get('b')?.[0].value, 2, 'CRLF');
  const only = parsePrometheus(VLLM_TEXT, new Set(['weird_neg']));
  t.same([...only.keys()], ['weird_neg']);
});

t.test('vllm signals', async (t) => {
  const s = signalsFromMetrics('vllm', VLLM_TEXT)!;
  t.equal(s.waiting, 7);
  t.equal(s.running, 3);
  t.equal(s.kvUsage, 0.4213, 'older gpu_cache_usage_perc name');
  t.same(s.loraRunning, ['support-bot-lora', 'sql'], 'newest lora_requests_info series');
  t.same(s.loraWaiting, ['other']);
  t.equal(s.maxLoras, 2);
  t.equal(s.blockSize, 16);
  t.equal(s.numGpuBlocks, 27153);
  const n = signalsFromMetrics('vllm', 'vllm:kv_cache_usage_perc{a="1"} 0.9\nvllm:num_requests_waiting 1\n')!;
  t.equal(n.kvUsage, 0.9, 'newer kv_cache_usage_perc name');
  t.equal(signalsFromMetrics('vllm', 'go_goroutines 12\n'), null, 'not a vLLM page');
});

t.test('sglang signals', async (t) => {
  const s = signalsFromMetrics(
    'sglang',
    '# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs{model_name="m"} 4\nsglang:num_running_reqs{model_name="m"} 9\nsglang:token_usage{model_name="m"} 0.55\n',
  )!;
  t.same([s.waiting, s.running, s.kvUsage], [4, 9, 0.55]);
});

t.test('max_model_len from /v1/models: the base model\'s, never an adapter\'s', async (t) => {
  t.equal(maxModelLenFromModels({ data: [{ id: 'base', parent: null, max_model_len: 32768 }, { id: 'sql', parent: 'base', max_model_len: 4096 }] }), 32768);
  t.equal(maxModelLenFromModels({ data: [{ id: 'a', max_model_len: 8192 }, { id: 'b', max_model_len: 4096 }] }), 4096, 'two base models: the least');
  t.equal(maxModelLenFromModels({ data: [{ id: 'a' }] }), null, 'not said');
  for (const bad of [0, -1, 1.5, '4096', null, 2 ** 60]) t.equal(maxModelLenFromModels({ data: [{ id: 'a', max_model_len: bad }] }), null, `not a length: ${JSON.stringify(bad)}`);
  t.equal(maxModelLenFromModels('x'), null);
  t.equal(maxModelLenFromModels({ data: 'x' }), null);
});

t.test('adapters from /v1/models', async (t) => {
  t.same(
    adaptersFromModels({ data: [{ id: 'base', parent: null }, { id: 'sql', parent: 'base' }] }),
    ['sql'],
  );
  t.equal(adaptersFromModels('x'), null);
});
