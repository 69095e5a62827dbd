export { ContractKind, defineContract, defineJsonContract, type Contract } from './codec.js';
export * from './messages.js';
export * from './topics.js';
export * from './channels.js';
