export type * from './types.js';
export { giveBackTensorBuffer, takeTensorBuffer } from './tensor-buffers.js';
