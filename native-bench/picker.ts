export async function runPicker(_opts: Map<string, string>): Promise<void> { throw new Error('todo'); }
export async function pickerChild(_opts: Map<string, string>): Promise<void> { throw new Error('todo'); }
