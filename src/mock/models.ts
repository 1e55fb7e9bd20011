/**
 * The `GET /v1/models` answer as vLLM gives it: a card for the base model (with `max_model_len`) and one
 * per LoRA adapter, whose `parent` is the base model. Pure.
 */

/** The models list JSON; `created` is the unix time in seconds every card shows. */
export function modelsBody(model: string, loras: readonly string[], maxModelLen: number, created: number): string {
  const card = (id: string, root: string, parent: string | null) => ({
    id,
    object: 'model',
    created,
    owned_by: 'vllm',
    root,
    parent,
    max_model_len: parent === null ? maxModelLen : undefined,
    permission: [
      {
        id: `modelperm-${id}`,
        object: 'model_permission',
        created,
        allow_create_engine: false,
        allow_sampling: true,
        allow_logprobs: true,
        allow_search_indices: false,
        allow_view: true,
        allow_fine_tuning: false,
        organization: '*',
        group: null,
        is_blocking: false,
      },
    ],
  });
  const data = [card(model, model, null), ...loras.map((l) => card(l, `/adapters/${l}`, model))];
  return JSON.stringify({ object: 'list', data });
}
