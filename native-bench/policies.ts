export async function runPolicies(_opts: Map<string, string>): Promise<number> { throw new Error('todo'); }
