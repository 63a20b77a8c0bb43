# An Azure storage module: a resource group and a storage account, names validated.
provider "azurerm" {
  features {}
}

module "storage" {
  source = "./modules/storage"

  name     = "acmelogs"
  location = "westeurope"
  replicas = "GRS"
}

output "account_id" {
  value = module.storage.account_id
}
