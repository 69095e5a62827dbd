export { evenSloSplit } from './slo-split.js';
