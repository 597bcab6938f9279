import type { TemplateEngine } from '../../src/message/template-engine.ts';

/**
 * Breaks an engine's instance behind its back, as the review's attack did: values nested thousands
 * of levels overflowed the stack inside WebAssembly and left the instance's shadow stack pointer
 * astray, so that every later call failed with memory access out of bounds. Here the pointer is
 * moved far past the (capped) memory directly, which does the same every time.
 */
export function corrupt(engine: TemplateEngine): void {
  const wasm = (engine.module as unknown as { __wasm: { __wbindgen_add_to_stack_pointer(delta: number): number } }).__wasm;
  wasm.__wbindgen_add_to_stack_pointer(0x4000_0000);
}
