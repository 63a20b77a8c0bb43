provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "main" {
  name     = "rg-media"
  location = "westeurope"
}

resource "azurerm_storage_account" "media" {
  name                            = "acmemedia001"
  resource_group_name             = azurerm_resource_group.main.name
  location                        = azurerm_resource_group.main.location
  account_tier                    = "Standard"
  account_replication_type        = "LRS"
  allow_nested_items_to_be_public = true
}

resource "azurerm_storage_container" "uploads" {
  name                  = "uploads"
  storage_account_id    = azurerm_storage_account.media.id
  container_access_type = "private"
}
