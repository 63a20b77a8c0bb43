provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-data"
  location = "westeurope"
}

resource "azurerm_storage_account" "data" {
  name                       = "acmedata001"
  resource_group_name        = azurerm_resource_group.main.name
  location                   = azurerm_resource_group.main.location
  account_kind               = "StorageV2"
  account_tier               = "Standard"
  account_replication_type   = "GRS"
  https_traffic_only_enabled = true
  min_tls_version            = "TLS1_2"
}
