export { buildHeads, headWeights, writeHeads, type HeadOptions, type WrittenHeads } from './heads.js';
export { measureMemory, type MemoryFigures, type MemoryProbe } from './memory.js';
export { centernetStills } from './stills.js';
